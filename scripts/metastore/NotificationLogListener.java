/*
 * A test fixture of airflow-provider-acid: the metastore's notification log (NOTIFICATION_LOG) for
 * the standalone Hive metastore 4.0.1 that scripts/metastore.py runs.
 *
 * Why it is ours: production metastores write the log with Hive's DbNotificationListener
 * (hive-hcatalog-server-extensions), but none runs on 4.0.1 here. Maven Central serves no
 * hive-hcatalog-server-extensions 4.0.x or 4.1.0; 4.2.0 is Java 21 bytecode and calls APIs 4.0.1
 * lacks (CommitTxnEvent.getDatabases/getWriteId, AlterPartitionsMessage); 3.1.3 calls
 * MessageFactory methods 4.0.1 lacks. So this listener does what DbNotificationListener does for
 * the events a change feed needs, with 4.0.1's own message builder (MessageBuilder) and encoder
 * (MessageFactory.getDefaultInstance): the messages are 4.0.1's real JSON, as
 * DbNotificationListener builds them. Table and partition events are written through the
 * RawStore (inside the metastore's own transaction); transaction events through the direct SQL
 * connection the transaction handler passes (inside its JDBC transaction), as
 * DbNotificationListener does. File lists (for replication) are left out. Old events are removed
 * as DbNotificationListener's cleaner thread removes them: one thread per metastore calls the
 * RawStore's cleanNotificationEvents and cleanWriteNotificationEvents with
 * metastore.event.db.listener.timetolive, every metastore.event.db.listener.clean.interval, after
 * metastore.event.db.listener.clean.startup.wait.interval (repl.cm.enabled's own time-to-live is
 * left out: no replication here).
 *
 * Compiled by scripts/metastore.py with javac --release 17 against the 4.0.1 jars and enabled with
 * `scripts/metastore.py start --notifications` (metastore.transactional.event.listeners).
 */
package acidtest;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Collections;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.HMSHandler;
import org.apache.hadoop.hive.metastore.MetaStoreEventListenerConstants;
import org.apache.hadoop.hive.metastore.RawStore;
import org.apache.hadoop.hive.metastore.RawStoreProxy;
import org.apache.hadoop.hive.metastore.TransactionalMetaStoreEventListener;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.Table;
import org.apache.hadoop.hive.metastore.api.TxnType;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf;
import org.apache.hadoop.hive.metastore.conf.MetastoreConf.ConfVars;
import org.apache.hadoop.hive.metastore.events.*;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.EventMessage.EventType;
import org.apache.hadoop.hive.metastore.messaging.MessageBuilder;
import org.apache.hadoop.hive.metastore.messaging.MessageEncoder;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.tools.SQLGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class NotificationLogListener extends TransactionalMetaStoreEventListener {
  private static final String NL_SEQUENCE = "org.apache.hadoop.hive.metastore.model.MNotificationLog";
  private static final Logger LOG = LoggerFactory.getLogger(NotificationLogListener.class);
  private static Thread cleaner = null; // one per metastore, as DbNotificationListener's
  private final MessageEncoder encoder;

  public NotificationLogListener(Configuration conf) throws MetaException {
    super(conf);
    encoder = MessageFactory.getDefaultInstance(conf);
    startCleaner(conf);
  }

  /** DbNotificationListener.CleanerThread: removes the events older than the time-to-live. */
  private static synchronized void startCleaner(Configuration conf) throws MetaException {
    if (cleaner != null) return;
    RawStore rs = RawStoreProxy.getProxy(conf, conf, MetastoreConf.getVar(conf, ConfVars.RAW_STORE_IMPL));
    int ttl = (int) Math.min(Integer.MAX_VALUE,
        MetastoreConf.getTimeVar(conf, ConfVars.EVENT_DB_LISTENER_TTL, TimeUnit.SECONDS));
    long interval = MetastoreConf.getTimeVar(conf, ConfVars.EVENT_DB_LISTENER_CLEAN_INTERVAL,
        TimeUnit.MILLISECONDS);
    long wait = MetastoreConf.getTimeVar(conf,
        ConfVars.EVENT_DB_LISTENER_CLEAN_STARTUP_WAIT_INTERVAL, TimeUnit.MILLISECONDS);
    cleaner = new Thread(() -> {
      LOG.info("notification log cleaner: time-to-live {}s, every {}ms after {}ms", ttl, interval, wait);
      try {
        Thread.sleep(wait);
        while (true) {
          try {
            rs.cleanNotificationEvents(ttl);
            rs.cleanWriteNotificationEvents(ttl);
          } catch (Exception ex) {
            LOG.warn("notification log cleaner: " + ex, ex);
          }
          Thread.sleep(interval);
        }
      } catch (InterruptedException e) {
        LOG.info("notification log cleaner interrupted; exiting");
      }
    }, "DB-Notification-Cleaner");
    cleaner.setDaemon(true);
    cleaner.start();
  }

  private NotificationEvent event(EventType type, EventMessage msg, String db, String table) {
    NotificationEvent e = new NotificationEvent(0, (int) (System.currentTimeMillis() / 1000),
        type.toString(), encoder.getSerializer().serialize(msg));
    e.setMessageFormat(encoder.getMessageFormat());
    e.setCatName("hive");
    e.setDbName(db);
    e.setTableName(table);
    return e;
  }

  private void viaRawStore(NotificationEvent e, ListenerEvent source) throws MetaException {
    HMSHandler.getMSForConf(getConf()).addNotificationEvent(e);
    source.putParameter(MetaStoreEventListenerConstants.DB_NOTIFICATION_EVENT_ID_KEY_NAME,
        Long.toString(e.getEventId()));
  }

  private NotificationEvent tableEvent(EventType type, EventMessage msg, Table t) {
    NotificationEvent e = event(type, msg, t.getDbName(), t.getTableName());
    if (t.isSetCatName()) e.setCatName(t.getCatName());
    return e;
  }

  @Override public void onCreateTable(CreateTableEvent ev) throws MetaException {
    Table t = ev.getTable();
    viaRawStore(tableEvent(EventType.CREATE_TABLE, MessageBuilder.getInstance()
        .buildCreateTableMessage(t, Collections.emptyIterator()), t), ev);
  }

  @Override public void onAlterTable(AlterTableEvent ev) throws MetaException {
    Table t = ev.getNewTable();
    viaRawStore(tableEvent(EventType.ALTER_TABLE, MessageBuilder.getInstance()
        .buildAlterTableMessage(ev.getOldTable(), t, ev.getIsTruncateOp(), ev.getWriteId()), t), ev);
  }

  @Override public void onDropTable(DropTableEvent ev) throws MetaException {
    Table t = ev.getTable();
    viaRawStore(tableEvent(EventType.DROP_TABLE,
        MessageBuilder.getInstance().buildDropTableMessage(t), t), ev);
  }

  @Override public void onAddPartition(AddPartitionEvent ev) throws MetaException {
    Table t = ev.getTable();
    viaRawStore(tableEvent(EventType.ADD_PARTITION, MessageBuilder.getInstance()
        .buildAddPartitionMessage(t, ev.getPartitionIterator(), Collections.emptyIterator()), t), ev);
  }

  @Override public void onOpenTxn(OpenTxnEvent ev, Connection c, SQLGenerator g) throws MetaException {
    if (ev.getTxnType() == TxnType.READ_ONLY) return;
    int last = ev.getTxnIds().size() - 1;
    viaSql(event(EventType.OPEN_TXN, MessageBuilder.getInstance()
        .buildOpenTxnMessage(ev.getTxnIds().get(0), ev.getTxnIds().get(last)), null, null), ev, c, g);
  }

  @Override public void onCommitTxn(CommitTxnEvent ev, Connection c, SQLGenerator g) throws MetaException {
    if (ev.getTxnType() == TxnType.READ_ONLY) return;
    viaSql(event(EventType.COMMIT_TXN,
        MessageBuilder.getInstance().buildCommitTxnMessage(ev.getTxnId()), null, null), ev, c, g);
  }

  @Override public void onAbortTxn(AbortTxnEvent ev, Connection c, SQLGenerator g) throws MetaException {
    if (ev.getTxnType() == TxnType.READ_ONLY) return;
    viaSql(event(EventType.ABORT_TXN, MessageBuilder.getInstance()
        .buildAbortTxnMessage(ev.getTxnId(), ev.getDbsUpdated()), null, null), ev, c, g);
  }

  @Override public void onAllocWriteId(AllocWriteIdEvent ev, Connection c, SQLGenerator g)
      throws MetaException {
    viaSql(event(EventType.ALLOC_WRITE_ID, MessageBuilder.getInstance().buildAllocWriteIdMessage(
        ev.getTxnToWriteIdList(), ev.getDbName(), ev.getTableName()), ev.getDbName(),
        ev.getTableName()), ev, c, g);
  }

  @Override public boolean doesAddEventsToNotificationLogTable() {
    return true;
  }

  /** One row of NOTIFICATION_LOG in the transaction handler's own JDBC transaction. */
  private void viaSql(NotificationEvent e, ListenerEvent source, Connection c, SQLGenerator g)
      throws MetaException {
    if (c == null || g == null) {
      viaRawStore(e, source);
      return;
    }
    try {
      if (g.getDbProduct().isDERBY()) { // Derby's FOR UPDATE does not lock: lock the table
        try (Statement s = c.createStatement()) {
          s.execute(g.lockTable("NOTIFICATION_SEQUENCE", false));
        }
      }
      long eventId = next(c, g.addForUpdateClause(
          "select \"NEXT_EVENT_ID\" from \"NOTIFICATION_SEQUENCE\""), null,
          "update \"NOTIFICATION_SEQUENCE\" set \"NEXT_EVENT_ID\" = ?");
      long nlId = next(c, g.addForUpdateClause(
          "select \"NEXT_VAL\" from \"SEQUENCE_TABLE\" where \"SEQUENCE_NAME\" = ?"), NL_SEQUENCE,
          "update \"SEQUENCE_TABLE\" set \"NEXT_VAL\" = ? where \"SEQUENCE_NAME\" = ?");
      try (PreparedStatement p = c.prepareStatement("insert into \"NOTIFICATION_LOG\" (\"NL_ID\", "
          + "\"EVENT_ID\", \"EVENT_TIME\", \"EVENT_TYPE\", \"MESSAGE\", \"MESSAGE_FORMAT\", "
          + "\"DB_NAME\", \"TBL_NAME\", \"CAT_NAME\") values (?,?,?,?,?,?,?,?,?)")) {
        p.setLong(1, nlId);
        p.setLong(2, eventId);
        p.setLong(3, e.getEventTime());
        p.setString(4, e.getEventType());
        p.setString(5, e.getMessage());
        p.setString(6, e.getMessageFormat());
        p.setString(7, e.getDbName());
        p.setString(8, e.getTableName());
        p.setString(9, e.getCatName());
        p.executeUpdate();
      }
      e.setEventId(eventId);
      source.putParameter(MetaStoreEventListenerConstants.DB_NOTIFICATION_EVENT_ID_KEY_NAME,
          Long.toString(eventId));
    } catch (SQLException ex) {
      throw new MetaException("NotificationLogListener: " + e.getEventType() + ": " + ex);
    }
  }

  /** Reads a sequence's next value (locked for update) and moves it on by one. */
  private static long next(Connection c, String select, String name, String update)
      throws SQLException, MetaException {
    long value;
    try (PreparedStatement p = c.prepareStatement(select)) {
      if (name != null) p.setString(1, name);
      try (ResultSet rs = p.executeQuery()) {
        if (!rs.next()) throw new MetaException("no row in the sequence of " + select);
        value = rs.getLong(1);
      }
    }
    try (PreparedStatement p = c.prepareStatement(update)) {
      p.setLong(1, value + 1);
      if (name != null) p.setString(2, name);
      p.executeUpdate();
    }
    return value;
  }
}
