// Iceberg's REST catalog on 127.0.0.1, for the Iceberg sink's REST catalog test.
//
// Iceberg's own fixture server (org.apache.iceberg.rest.RESTCatalogServer, what the
// apache/iceberg-rest-fixture image runs) listens on every interface and needs Hadoop for its
// default FileIO. This launcher serves the same thing, Iceberg's RESTCatalogAdapter over a
// JdbcCatalog (SQLite) behind Iceberg's RESTCatalogServlet on Jetty, but binds 127.0.0.1 and
// keeps metadata files on the local disk through Iceberg's local files (org.apache.iceberg.Files).
//
// Run as a single-file source program (no build step), from scripts/iceberg_rest.py:
//   java -cp 'JARS/*' scripts/iceberg_rest/RestCatalog.java PORT JDBC_URI WAREHOUSE_URI
// PORT 0 picks a free one; the first line printed is "ready PORT".
import java.io.File;
import java.net.InetSocketAddress;
import java.net.URI;
import java.util.HashMap;
import java.util.Map;
import org.apache.iceberg.Files;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.jdbc.JdbcClientPool;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class RestCatalog {
  /** Local files, by file: URI or plain path. */
  public static class LocalFileIO implements FileIO {
    static File file(String location) {
      return location.startsWith("file:") ? new File(URI.create(location)) : new File(location);
    }

    @Override
    public InputFile newInputFile(String location) {
      return Files.localInput(file(location));
    }

    @Override
    public OutputFile newOutputFile(String location) {
      File target = file(location);
      target.getParentFile().mkdirs();
      return Files.localOutput(target);
    }

    @Override
    public void deleteFile(String location) {
      file(location).delete();
    }
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    Map<String, String> props = new HashMap<>();
    props.put("uri", args[1]);
    props.put("warehouse", args[2]);
    props.put("jdbc.schema-version", "V1");
    JdbcCatalog catalog =
        new JdbcCatalog(conf -> new LocalFileIO(), conf -> new JdbcClientPool(args[1], conf), true);
    catalog.initialize("rest_backend", props);

    ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
    context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(catalog))), "/*");
    Server server = new Server(new InetSocketAddress("127.0.0.1", port));
    server.setHandler(context);
    server.start();
    System.out.println("ready " + ((ServerConnector) server.getConnectors()[0]).getLocalPort());
    System.out.flush();
    server.join();
  }
}
