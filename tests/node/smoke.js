// Connect to `cqlcdc serve` with the Node.js cassandra-driver, write, read the CDC log.
// Usage: node smoke.js HOST PORT; prints one JSON line, exits non-zero on any failure.
const cassandra = require('cassandra-driver');

async function main() {
  const [host, port] = process.argv.slice(2);
  const client = new cassandra.Client({
    contactPoints: [`${host}:${port}`],
    localDataCenter: 'datacenter1',
    protocolOptions: { maxVersion: 4 },
  });
  await client.connect();
  await client.execute(
    "CREATE KEYSPACE IF NOT EXISTS nodeks WITH replication = " +
    "{'class': 'SimpleStrategy', 'replication_factor': 1}");
  await client.execute(
    "CREATE TABLE IF NOT EXISTS nodeks.t (pk int, ck text, v double, PRIMARY KEY (pk, ck)) " +
    "WITH cdc = {'enabled': true}");
  await client.execute('INSERT INTO nodeks.t (pk, ck, v) VALUES (?, ?, ?)', [1, 'a', 1.5],
                       { prepare: true });
  await client.execute('UPDATE nodeks.t SET v = ? WHERE pk = ? AND ck = ?', [2.5, 1, 'a'],
                       { prepare: true });
  const rows = (await client.execute('SELECT pk, ck, v FROM nodeks.t')).rows;
  const log = (await client.execute(
    'SELECT "cdc$operation", pk, ck, v FROM nodeks.t_scylla_cdc_log')).rows;
  console.log(JSON.stringify({
    rows: rows.map((r) => [r.pk, r.ck, r.v]),
    log: log.map((r) => [r['cdc$operation'], r.pk, r.ck, r.v]),
  }));
  await client.shutdown();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
