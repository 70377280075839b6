// A real HDFS for the tests: Hadoop's MiniDFSCluster (one NameNode, one DataNode, WebHDFS on),
// bound to 127.0.0.1, optionally with Kerberos (SPNEGO on the HTTP endpoints, block tokens).
//
//   java -cp 'lib/*' MiniHdfs.java BASEDIR RPC_PORT HTTP_PORT [PRINCIPAL KEYTAB SPNEGO_PRINCIPAL]
//   java -cp 'lib/*' MiniHdfs.java BASEDIR ha RPC1 HTTP1 RPC2 HTTP2
//
// Run by scripts/hdfs.py (Java's single-file launcher: no compile step). Makes /warehouse
// (mode 777, for the provider's user and the metastore) and /restricted (mode 700, the
// superuser's: what a user may not read). Prints "ready RPC_PORT HTTP_PORT DN_HTTP_PORT" once
// serving, then runs until killed.
//
// The second form is an HA pair (unsecured): the nameservice ns1 with the namenodes nn1
// (active) and nn2 (standby) sharing their edits, one DataNode serving both. It prints
// "ready RPC1 HTTP1 DN_HTTP_PORT RPC2 HTTP2", then fails over each time the file
// BASEDIR/failover.request appears: the active namenode becomes the standby, the other one
// active, and BASEDIR/failover.done then says "active N" (N: 0 or 1, the new active one).
import java.io.File;
import java.nio.file.Files;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.hdfs.MiniDFSNNTopology;
import org.apache.hadoop.security.UserGroupInformation;

public class MiniHdfs {
  public static void main(String[] args) throws Exception {
    String base = args[0];
    if (args[1].equals("ha")) {
      highlyAvailable(base, args);
      return;
    }
    int rpcPort = Integer.parseInt(args[1]);
    int httpPort = Integer.parseInt(args[2]);
    boolean secure = args.length >= 6;
    Configuration conf = common(base);
    conf.set("dfs.namenode.rpc-address", "127.0.0.1:" + rpcPort);
    conf.set("dfs.namenode.http-address", "127.0.0.1:" + httpPort);
    if (secure) {
      String principal = args[3];
      String keytab = args[4];
      String spnego = args[5];
      conf.set("hadoop.security.authentication", "kerberos");
      conf.set("hadoop.security.authorization", "true");
      conf.set("dfs.namenode.kerberos.principal", principal);
      conf.set("dfs.namenode.keytab.file", keytab);
      conf.set("dfs.datanode.kerberos.principal", principal);
      conf.set("dfs.datanode.keytab.file", keytab);
      conf.set("dfs.web.authentication.kerberos.principal", spnego);
      conf.set("dfs.web.authentication.kerberos.keytab", keytab);
      // Hadoop 3.3's WebHDFS filter takes its settings from hadoop.http.authentication.*
      conf.set("hadoop.http.authentication.type", "kerberos");
      conf.set("hadoop.http.authentication.kerberos.principal", spnego);
      conf.set("hadoop.http.authentication.kerberos.keytab", keytab);
      conf.set("hadoop.http.authentication.simple.anonymous.allowed", "false");
      conf.set("dfs.block.access.token.enable", "true");
      // No privileged ports and no TLS for the DataNode: Hadoop's own switch for tests.
      conf.set("ignore.secure.ports.for.testing", "true");
      UserGroupInformation.setConfiguration(conf);
      UserGroupInformation.loginUserFromKeytab(principal, keytab);
    }
    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf)
            .numDataNodes(1)
            .nameNodePort(rpcPort)
            .nameNodeHttpPort(httpPort)
            .checkDataNodeAddrConfig(true)
            .checkDataNodeHostConfig(true)
            .build();
    cluster.waitActive();
    folders(cluster.getFileSystem());
    int dnHttp = cluster.getDataNodes().get(0).getInfoPort();
    System.out.println("ready " + cluster.getNameNodePort() + " " + cluster.getNameNode()
        .getHttpAddress().getPort() + " " + dnHttp);
    System.out.flush();
    Thread.currentThread().join();
  }

  // Every cluster's settings: loopback only, one replica, small blocks, permissions on.
  static final String[][] COMMON = {
    {"dfs.datanode.address", "127.0.0.1:0"},
    {"dfs.datanode.http.address", "127.0.0.1:0"},
    {"dfs.datanode.ipc.address", "127.0.0.1:0"},
    {"dfs.datanode.hostname", "127.0.0.1"},
    {"dfs.webhdfs.enabled", "true"},
    {"dfs.permissions.enabled", "true"},
    {"dfs.replication", "1"},
    {"dfs.namenode.safemode.extension", "0"},
    {"dfs.blocksize", "1048576"},
    {"dfs.namenode.fs-limits.min-block-size", "1024"},
    // The metastore makes table folders as its client (doAs): hive may impersonate anyone.
    {"hadoop.proxyuser.hive.hosts", "*"},
    {"hadoop.proxyuser.hive.groups", "*"},
  };

  static Configuration common(String base) {
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(base, "data").getAbsolutePath());
    for (String[] setting : COMMON) {
      conf.set(setting[0], setting[1]);
    }
    return conf;
  }

  static void folders(FileSystem fs) throws Exception {
    Path warehouse = new Path("/warehouse");
    fs.mkdirs(warehouse);
    fs.setPermission(warehouse, new FsPermission((short) 0777));
    Path restricted = new Path("/restricted");
    fs.mkdirs(restricted);
    fs.setPermission(restricted, new FsPermission((short) 0700));
  }

  static void highlyAvailable(String base, String[] args) throws Exception {
    Configuration conf = common(base);
    MiniDFSNNTopology topology = new MiniDFSNNTopology().addNameservice(
        new MiniDFSNNTopology.NSConf("ns1")
            .addNN(new MiniDFSNNTopology.NNConf("nn1")
                .setIpcPort(Integer.parseInt(args[2])).setHttpPort(Integer.parseInt(args[3])))
            .addNN(new MiniDFSNNTopology.NNConf("nn2")
                .setIpcPort(Integer.parseInt(args[4])).setHttpPort(Integer.parseInt(args[5]))));
    MiniDFSCluster cluster =
        new MiniDFSCluster.Builder(conf)
            .nnTopology(topology)
            .numDataNodes(1)
            .checkDataNodeAddrConfig(true)
            .checkDataNodeHostConfig(true)
            .build();
    cluster.waitActive();
    cluster.transitionToActive(0);
    folders(cluster.getFileSystem(0));
    int dnHttp = cluster.getDataNodes().get(0).getInfoPort();
    System.out.println("ready " + cluster.getNameNode(0).getNameNodeAddress().getPort() + " "
        + cluster.getNameNode(0).getHttpAddress().getPort() + " " + dnHttp + " "
        + cluster.getNameNode(1).getNameNodeAddress().getPort() + " "
        + cluster.getNameNode(1).getHttpAddress().getPort());
    System.out.flush();
    File request = new File(base, "failover.request");
    File done = new File(base, "failover.done");
    int active = 0;
    while (true) {
      if (request.exists()) {
        request.delete();
        cluster.transitionToStandby(active);
        active = 1 - active;
        cluster.transitionToActive(active);
        Files.writeString(done.toPath(), "active " + active + "\n");
      }
      Thread.sleep(200);
    }
  }
}
