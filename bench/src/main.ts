/**
 * `npm run bench`: the stores side by side with their peers, in one process.
 *
 *   npm run bench                       full run; writes BENCHMARKS.md, bench/results.json and bench/results.svg
 *   npm run bench -- --quick            a small run for CI (about a minute); writes nothing
 *   npm run bench -- --pg-url <url>     PostgreSQL server (default: TEST_PG_URL, else embedded PGlite)
 *   npm run bench -- --redis-url <url>  Redis server (default: TEST_REDIS_URL, else a redis-server it starts)
 *   npm run bench -- --mysql-url <url>  MariaDB server (default: TEST_MYSQL_URL, else a mariadbd it starts)
 *   npm run bench -- --amqp-url <url>   RabbitMQ server (default: TEST_AMQP_URL, else a rabbitmq-server node it starts)
 *   npm run bench -- --nats-url <url>   NATS server with JetStream (default: TEST_NATS_URL, else a nats-server it starts)
 *   npm run bench -- --only dynamodb,postgres,transactional,redis,sql,queue,memory,costs,encryption,heap
 *   npm run bench -- --rounds <n>       rounds per suite
 *   npm run bench -- --write / --no-write
 *
 * DynamoDB Local (when Java is found, always with -disableTelemetry), dynalite, PGlite, redis-server,
 * mariadbd, a rabbitmq-server node and nats-server are started on 127.0.0.1 for their suite and
 * stopped after it, or when the run is interrupted (SIGINT, SIGTERM). Exits with 1 when a suite
 * fails, 130 when interrupted.
 */
import { dynalite, dynamoDbLocal, findJava } from "@effect-idempotency/test-support/DynamoDb"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import * as Chart from "./Chart.js"
import * as Costs from "./Costs.js"
import * as DynamoDbBench from "./DynamoDbBench.js"
import * as EncryptionBench from "./EncryptionBench.js"
import * as Environment from "./Environment.js"
import * as MemoryBench from "./MemoryBench.js"
import * as PostgresBench from "./PostgresBench.js"
import * as QueueBench from "./QueueBench.js"
import * as RedisBench from "./RedisBench.js"
import * as Report from "./Report.js"
import * as SqlBench from "./SqlBench.js"
import type { Plan } from "./Suite.js"
import * as TransactionalBench from "./TransactionalBench.js"

const SECTIONS = [
  "dynamodb",
  "postgres",
  "transactional",
  "redis",
  "sql",
  "queue",
  "memory",
  "costs",
  "encryption",
  "heap"
] as const
type Section = typeof SECTIONS[number]

interface Args {
  readonly quick: boolean
  readonly pgUrl: string | undefined
  readonly redisUrl: string | undefined
  readonly mysqlUrl: string | undefined
  readonly amqpUrl: string | undefined
  readonly natsUrl: string | undefined
  readonly only: ReadonlySet<Section>
  readonly rounds: number | undefined
  readonly write: boolean | undefined
}

const usage = "usage: npm run bench -- [--quick] [--pg-url <url>] [--redis-url <url>] [--mysql-url <url>] " +
  "[--amqp-url <url>] [--nats-url <url>] [--only " +
  SECTIONS.join(",") +
  "] [--rounds <n>] [--write | --no-write]"

const positive = (flag: string, value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${flag} needs a positive integer`)
  return n
}

const parse = (argv: Array<string>): Args => {
  const { values } = parseArgs({
    args: argv,
    options: {
      "quick": { type: "boolean", default: false },
      "pg-url": { type: "string" },
      "redis-url": { type: "string" },
      "mysql-url": { type: "string" },
      "amqp-url": { type: "string" },
      "nats-url": { type: "string" },
      "only": { type: "string" },
      "rounds": { type: "string" },
      "write": { type: "boolean" },
      "no-write": { type: "boolean" },
      "help": { type: "boolean", short: "h" }
    },
    strict: true
  })
  if (values.help === true) {
    process.stdout.write(`${usage}\n`)
    process.exit(0)
  }
  const pgUrl = values["pg-url"] ?? (process.env.TEST_PG_URL === "" ? undefined : process.env.TEST_PG_URL)
  if (pgUrl !== undefined && !pgUrl.startsWith("postgres")) throw new Error("--pg-url needs a postgres:// URL")
  const redisUrl = values["redis-url"] ?? (process.env.TEST_REDIS_URL === "" ? undefined : process.env.TEST_REDIS_URL)
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) throw new Error("--redis-url needs a redis:// URL")
  const mysqlUrl = values["mysql-url"] ?? (process.env.TEST_MYSQL_URL === "" ? undefined : process.env.TEST_MYSQL_URL)
  if (mysqlUrl !== undefined && !mysqlUrl.startsWith("mysql://")) throw new Error("--mysql-url needs a mysql:// URL")
  const amqpUrl = values["amqp-url"] ?? (process.env.TEST_AMQP_URL === "" ? undefined : process.env.TEST_AMQP_URL)
  if (amqpUrl !== undefined && !/^amqps?:\/\//.test(amqpUrl)) throw new Error("--amqp-url needs an amqp:// URL")
  const natsUrl = values["nats-url"] ?? (process.env.TEST_NATS_URL === "" ? undefined : process.env.TEST_NATS_URL)
  if (natsUrl !== undefined && !natsUrl.startsWith("nats://")) throw new Error("--nats-url needs a nats:// URL")
  const only = values.only === undefined ? SECTIONS : values.only.split(",")
  const unknown = only.filter((name) => !(SECTIONS as ReadonlyArray<string>).includes(name))
  if (unknown.length > 0) throw new Error(`unknown section ${unknown.join(", ")}\n${usage}`)
  return {
    quick: values.quick === true,
    pgUrl,
    redisUrl,
    mysqlUrl,
    amqpUrl,
    natsUrl,
    only: new Set(only as ReadonlyArray<Section>),
    rounds: positive("rounds", values.rounds),
    write: values["no-write"] === true ? false : values.write
  }
}

/** The sizes of a full and of a quick run. */
const sizes = (quick: boolean, rounds: number | undefined) => {
  const runId = randomUUID().slice(0, 8)
  const pick = <A>(quickValue: A, fullValue: A): A => quick ? quickValue : fullValue
  const plan = (r: number, c1: number, c16: number, warmupCalls: number): Plan => ({
    runId,
    rounds: rounds ?? r,
    concurrencies: [{ concurrency: 1, calls: c1 }, { concurrency: 16, calls: c16 }],
    warmupCalls,
    profileCalls: c16
  })
  return {
    dynamodbLocal: pick(plan(2, 10, 32, 8), plan(7, 120, 480, 40)),
    // fewer calls: dynalite evaluates condition expressions slowly (see bench/README.md)
    dynalite: pick(plan(2, 10, 32, 8), plan(5, 40, 160, 20)),
    postgres: pick(plan(2, 10, 32, 8), plan(7, 200, 800, 50)),
    transactional: { rounds: rounds ?? pick(2, 5), calls: pick(16, 200) },
    redis: pick(plan(2, 10, 32, 8), plan(7, 300, 1200, 100)),
    sql: {
      mariadb: pick(plan(2, 10, 32, 8), plan(7, 150, 600, 40)),
      sqlite: pick(plan(2, 10, 32, 8), plan(7, 300, 1200, 100)),
      // fewer calls: a libSQL file keeps the rollback journal, so each write waits for syncs to disk
      libsql: pick(plan(2, 10, 32, 8), plan(5, 40, 160, 20))
    },
    queue: {
      runId,
      rounds: rounds ?? pick(2, 5),
      concurrencies: [
        { concurrency: 1, messages: pick(20, 500) },
        { concurrency: 16, messages: pick(64, 4_000) }
      ],
      warmupMessages: pick(16, 200)
    } satisfies QueueBench.Plan,
    memory: { calls: pick(2_000, 10_000), rounds: rounds ?? pick(3, 9) },
    costs: { calls: pick(1_000, 10_000), rounds: rounds ?? pick(2, 7) },
    encryption: {
      runId,
      rounds: rounds ?? pick(2, 5),
      warmupCalls: pick(4, 50),
      // fewer calls where a call takes milliseconds: libSQL syncs each write to disk, dynalite is slow
      calls: quick
        ? { memory: 20, sqlite: 10, libsql: 10, mariadb: 10, postgres: 10, dynamodbLocal: 10, dynalite: 10, redis: 10 }
        : {
          memory: 1_000,
          sqlite: 400,
          libsql: 60,
          mariadb: 200,
          postgres: 200,
          dynamodbLocal: 200,
          dynalite: 60,
          redis: 300
        }
    } satisfies EncryptionBench.Plan,
    heap: { keys: pick(20_000, 1_000_000), purgeInterval: pick(Duration.millis(100), Duration.seconds(1)) }
  }
}

const FOOTER = `Method, goals and findings: [bench/README.md](bench/README.md). Raw figures of this run (every
round): [bench/results.json](bench/results.json).`

const program = (args: Args) =>
  Effect.gen(function*() {
    const started = performance.now()
    const size = sizes(args.quick, args.rounds)
    const java = Option.getOrUndefined(yield* findJava)
    const load: Array<{ section: string; loadAverage: number }> = []
    const section = (name: string) =>
      Effect.sync(() => {
        load.push({ section: name, loadAverage: Environment.loadAverage() })
        const elapsed = ((performance.now() - started) / 1000).toFixed(1)
        process.stdout.write(`— ${name} (at ${elapsed} s, load average ${Environment.loadAverage()})\n`)
      })
    const dynamodb: Array<Report.DynamoDbRun> = []
    const skipped: Array<string> = []
    let postgres: Report.PostgresRun | undefined
    let transactional: TransactionalBench.Result | undefined
    let redis: Report.RedisRun | undefined
    let sql: Report.SqlRun | undefined
    let queue: QueueBench.Result | undefined
    let memory: MemoryBench.OverheadResult | undefined
    let costs: ReadonlyArray<Costs.Cost> | undefined
    let encryption: EncryptionBench.Result | undefined
    let heap: MemoryBench.HeapResult | undefined

    if (args.only.has("dynamodb")) {
      if (java === undefined) {
        skipped.push("DynamoDB Local (no java found)")
      } else {
        yield* section("DynamoDB Local")
        const result = yield* Effect.scoped(Effect.flatMap(
          dynamoDbLocal(java),
          (url) => DynamoDbBench.run({ name: "DynamoDB Local", url }, size.dynamodbLocal, { cache: true, tracer: true })
        ))
        dynamodb.push({ endpoint: "DynamoDB Local", plan: size.dynamodbLocal, result })
      }
      yield* section("dynalite")
      const result = yield* Effect.scoped(Effect.flatMap(
        dynalite,
        (url) => DynamoDbBench.run({ name: "dynalite", url }, size.dynalite, { cache: false, tracer: false })
      ))
      dynamodb.push({ endpoint: "dynalite", plan: size.dynalite, result })
    }
    if (args.only.has("postgres")) {
      yield* section(`PostgreSQL (${args.pgUrl === undefined ? "PGlite" : "server"})`)
      const poolSize = 16
      const { database, result } = yield* PostgresBench.run(args.pgUrl, size.postgres, poolSize)
      postgres = { database, poolSize, plan: size.postgres, result }
    }
    if (args.only.has("transactional")) {
      yield* section(`PostgreSQL transactional mode (${args.pgUrl === undefined ? "PGlite" : "server"})`)
      transactional = yield* TransactionalBench.run(args.pgUrl, {
        runId: size.postgres.runId,
        poolSize: 16,
        ...size.transactional
      })
    }
    if (args.only.has("redis")) {
      yield* section(`Redis (${args.redisUrl === undefined ? "redis-server started by the run" : "server"})`)
      const { result, server } = yield* RedisBench.run(args.redisUrl, size.redis)
      redis = { server, plan: size.redis, result }
    }
    if (args.only.has("sql")) {
      const engines: Array<Report.SqlEngineRun> = []
      for (const engine of SqlBench.ENGINES) {
        yield* section(
          `SQL store: ${
            engine === "mariadb"
              ? `MariaDB (${args.mysqlUrl === undefined ? "mariadbd started by the run" : "server"})`
              : engine === "sqlite"
              ? "SQLite (better-sqlite3, a temporary file)"
              : "libSQL (a temporary file)"
          }`
        )
        const plan = size.sql[engine]
        engines.push({ ...yield* SqlBench.run(engine, args.mysqlUrl, plan), plan })
      }
      sql = { poolSize: SqlBench.MARIADB_POOL, engines }
    }
    if (args.only.has("queue")) {
      queue = yield* QueueBench.run(args, size.queue, section)
    }
    if (args.only.has("memory")) {
      yield* section("memory store overhead")
      memory = yield* MemoryBench.overhead(size.memory.calls, size.memory.rounds)
    }
    if (args.only.has("costs")) {
      yield* section("costs of the pieces")
      costs = yield* Costs.measure(size.costs.calls, size.costs.rounds)
    }
    if (args.only.has("encryption")) {
      encryption = yield* EncryptionBench.run({ ...args, java }, size.encryption, section)
    }
    if (args.only.has("heap")) {
      yield* section("memory store heap")
      heap = yield* MemoryBench.heap(size.heap.keys, size.heap.purgeInterval)
    }
    load.push({ section: "end", loadAverage: Environment.loadAverage() })

    const results: Report.Results = {
      date: new Date().toISOString(),
      quick: args.quick,
      seconds: (performance.now() - started) / 1000,
      // a URL's password (--mysql-url mysql://user:password@…) is not written into BENCHMARKS.md
      command: process.argv.length > 2
        ? `npm run bench -- ${process.argv.slice(2).join(" ").replace(/(\/\/[^:/@\s]*:)[^@\s]*@/g, "$1***@")}`
        : "npm run bench",
      revision: Environment.revision(),
      machine: Environment.machine(java),
      load,
      versions: Environment.versions(),
      dynamodb,
      postgres,
      redis,
      sql,
      memory,
      heap,
      costs,
      encryption,
      skipped
    }
    const markdown = Report.markdown(
      results,
      [
        ...(transactional === undefined ? [] : [TransactionalBench.markdown(transactional)]),
        ...(queue === undefined ? [] : [QueueBench.markdown(queue)]),
        FOOTER
      ].join("\n")
    )
    const summary = [Report.summary(results), ...(queue === undefined ? [] : [QueueBench.summary(queue)])]
    process.stdout.write(`\n${markdown}\n${summary.join("\n")}\n`)
    if (args.write ?? !args.quick) {
      const json = {
        ...results,
        goals: Report.goals(results),
        transactional,
        queue,
        ratios: {
          dynamodb: dynamodb.map((run) => ({
            endpoint: run.endpoint,
            ratios: Report.ratios(run.result, Report.dynamoDbPairs)
          })),
          postgres: postgres === undefined ? undefined : Report.ratios(postgres.result, Report.postgresPairs),
          redis: redis === undefined ? undefined : Report.ratios(redis.result, Report.redisPairs),
          sql: sql?.engines.map((run) => ({
            engine: run.database.engine,
            ratios: Report.ratios(run.result, Report.sqlPairs)
          })),
          queue: queue?.brokers.map((run) => ({ broker: run.broker, ratios: QueueBench.ratios(run) }))
        }
      }
      const chart = Chart.svg(
        [
          ...dynamodb.map((run) => ({ title: `DynamoDB: ${run.endpoint}`, result: run.result })),
          ...(postgres === undefined
            ? []
            : [{ title: `PostgreSQL (${postgres.database.kind})`, result: postgres.result }]),
          ...(redis === undefined ? [] : [{ title: `Redis (${redis.server.kind})`, result: redis.result }]),
          ...(sql?.engines ?? []).map((run) => ({
            title: `SQL store: ${Report.sqlEngineTitle(run.database)}`,
            result: run.result
          }))
        ],
        `${results.date.slice(0, 10)}, commit ${results.revision}, ${results.machine.cores} cores; ` +
          "ratios measured in one run are what to compare (BENCHMARKS.md)"
      )
      fs.writeFileSync(path.join(Environment.root, "BENCHMARKS.md"), markdown)
      fs.writeFileSync(path.join(Environment.root, "bench", "results.json"), `${JSON.stringify(json, null, 2)}\n`)
      fs.writeFileSync(path.join(Environment.root, "bench", "results.svg"), chart)
      process.stdout.write("\nwrote BENCHMARKS.md, bench/results.json and bench/results.svg\n")
    }
  }).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))

const main = () => {
  let args: Args
  try {
    args = parse(process.argv.slice(2))
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`)
    process.exit(2)
  }
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
  const fiber = Effect.runFork(program(args))
  // A signal interrupts the run: its scopes close, and so the servers it started stop (SIGTERM, then
  // SIGKILL). A second signal exits at once: the servers' exit hooks kill them (SIGKILL). `npm run
  // bench` execs this process with `node --import tsx`, so npm's SIGINT reaches it: under the `tsx`
  // command, which SIGKILLs a child that does not acknowledge a signal within 60 ms (a busy event
  // loop), the servers outlived the run.
  let signalled = false
  const stop = (signal: NodeJS.Signals) => {
    if (signalled) process.exit(128 + os.constants.signals[signal])
    signalled = true
    process.stderr.write(`${signal}: stopping the run and the servers it started (again to exit at once)\n`)
    Effect.runFork(Fiber.interrupt(fiber))
  }
  process.on("SIGINT", stop)
  process.on("SIGTERM", stop)
  fiber.addObserver((exit) => {
    process.off("SIGINT", stop)
    process.off("SIGTERM", stop)
    if (Exit.isInterrupted(exit)) {
      process.stderr.write("the benchmark was interrupted; the servers it started are stopped\n")
      process.exitCode = 130
    } else if (Exit.isFailure(exit)) {
      process.stderr.write(`the benchmark failed:\n${Cause.pretty(exit.cause)}\n${causes(Cause.squash(exit.cause))}`)
      process.exitCode = 1
    }
  })
}

/** The chain of causes under a failure (each one's name and message, bounded), which `Cause.pretty` leaves out. */
const causes = (error: unknown): string => {
  let out = ""
  let current = (error as { readonly cause?: unknown } | null)?.cause
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    const { message, name } = current as { readonly name?: unknown; readonly message?: unknown }
    out += `caused by: ${String(name ?? typeof current)}: ${String(message ?? current).slice(0, 500)}\n`
    current = (current as { readonly cause?: unknown }).cause
  }
  return out
}

main()
