// A real HDFS for the tests: Hadoop's MiniDFSCluster (one NameNode, one DataNode, WebHDFS on),
// bound to 127.0.0.1, optionally with Kerberos (SPNEGO on the HTTP endpoints, block tokens).
//
//   java -cp 'lib/*' MiniHdfs.java BASEDIR RPC_PORT HTTP_PORT [PRINCIPAL KEYTAB SPNEGO_PRINCIPAL]
//
// Run by scripts/hdfs.py (Java's single-file launcher: no compile step). Makes /warehouse
// (mode 777, for the provider's user and the metastore) and /restricted (mode 700, the
// superuser's: what a user may not read). Prints "ready RPC_PORT HTTP_PORT DN_HTTP_PORT" once
// serving, then runs until killed.
import java.io.File;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.security.UserGroupInformation;

public class MiniHdfs {
  public static void main(String[] args) throws Exception {
    String base = args[0];
    int rpcPort = Integer.parseInt(args[1]);
    int httpPort = Integer.parseInt(args[2]);
    boolean secure = args.length >= 6;
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(base, "data").getAbsolutePath());
    conf.set("dfs.namenode.rpc-address", "127.0.0.1:" + rpcPort);
    conf.set("dfs.namenode.http-address", "127.0.0.1:" + httpPort);
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.set("dfs.datanode.hostname", "127.0.0.1");
    conf.set("dfs.webhdfs.enabled", "true");
    conf.set("dfs.permissions.enabled", "true");
    conf.set("dfs.replication", "1");
    conf.set("dfs.namenode.safemode.extension", "0");
    conf.set("dfs.blocksize", "1048576");
    // The metastore makes table folders as its client (doAs): hive may impersonate anyone.
    conf.set("hadoop.proxyuser.hive.hosts", "*");
    conf.set("hadoop.proxyuser.hive.groups", "*");
    conf.set("dfs.namenode.fs-limits.min-block-size", "1024");
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
    FileSystem fs = cluster.getFileSystem();
    Path warehouse = new Path("/warehouse");
    fs.mkdirs(warehouse);
    fs.setPermission(warehouse, new FsPermission((short) 0777));
    Path restricted = new Path("/restricted");
    fs.mkdirs(restricted);
    fs.setPermission(restricted, new FsPermission((short) 0700));
    int dnHttp = cluster.getDataNodes().get(0).getInfoPort();
    System.out.println("ready " + cluster.getNameNodePort() + " " + cluster.getNameNode()
        .getHttpAddress().getPort() + " " + dnHttp);
    System.out.flush();
    Thread.currentThread().join();
  }
}
