// Single-row prepared INSERTs through the Node.js cassandra-driver, `inFlight` at a time,
// for `seconds`: a client whose own cost per request is small, so the figure is the
// server's (benchmarks/server.py runs it beside the Python driver).
// Prints "go" as the timed loop starts (benchmarks/serve_process.py reads the server's CPU
// then) and, last, one JSON summary with the client's own CPU over the loop (client_cpu_s).
// CONNECTIONS (default 1) connections share the requests: with `cqlcdc serve --workers N` the
// kernel spreads connections, not requests, over the workers.
// usage: node benchmarks/node_writes.js HOST PORT IN_FLIGHT SECONDS BASE [CONNECTIONS]
"use strict";
const path = require("path");
const cassandra = require(path.join(__dirname, "..", "tests", "node", "node_modules", "cassandra-driver"));

async function main() {
  const [host, port, inFlight, seconds, base, connections] = process.argv.slice(2);
  const client = new cassandra.Client({
    contactPoints: [`${host}:${port}`],
    localDataCenter: "datacenter1",
    keyspace: "ks",
    protocolOptions: { maxVersion: 4 },
    pooling: {
      maxRequestsPerConnection: 2048,
      coreConnectionsPerHost: { [cassandra.types.distance.local]: Number(connections || 1) },
    },
  });
  await client.connect();
  const insert = "INSERT INTO w (pk, v) VALUES (?, ?)";
  const options = { prepare: true };
  await client.execute(insert, [cassandra.types.Long.fromNumber(0), cassandra.types.Long.fromNumber(0)], options);
  const latencies = [];
  console.log("go");
  const cpu0 = process.cpuUsage();
  let next = Number(base);
  const started = process.hrtime.bigint();
  const deadline = started + BigInt(Math.round(Number(seconds) * 1e9));
  async function worker() {
    while (process.hrtime.bigint() < deadline) {
      const n = cassandra.types.Long.fromNumber(next++);
      const t0 = process.hrtime.bigint();
      await client.execute(insert, [n, n], options);
      latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  await Promise.all(Array.from({ length: Number(inFlight) }, worker));
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = process.cpuUsage(cpu0);  // µs, every thread of the process
  latencies.sort((a, b) => a - b);
  const pct = (q) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * q))];
  console.log(JSON.stringify({
    writes_per_s: latencies.length / elapsed,
    ack_p50_ms: pct(0.5),
    ack_p99_ms: pct(0.99),
    writes: latencies.length,
    client_cpu_s: (cpu.user + cpu.system) / 1e6,
  }));
  await client.shutdown();
}

main().catch((err) => { console.error(err); process.exit(1); });
