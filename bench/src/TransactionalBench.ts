/**
 * PostgreSQL: the transactional mode (`PgTransactional`) against the normal mode whose downstream
 * writes the same row in a transaction of its own. Both run one user INSERT per first execution:
 *
 * - `pg-transactional`: BEGIN, the reservation (which sets `lock_timeout`), the INSERT, the completion, COMMIT;
 * - `pg-store+own-transaction`: the reservation, then BEGIN, the INSERT, COMMIT, then the completion.
 *
 * A replay is BEGIN, the reservation and COMMIT for the first, the reservation alone
 * for the second. Rounds interleave the two (rotated), on one pool; round trips are the statements
 * the pool's clients send.
 *
 * On PGlite the pool has one connection. PGlite is one backend: its socket server queues the
 * protocol messages of all connections one message at a time, and while a connection holds a
 * transaction it serves that connection alone. The parameterized statements that other connections
 * send meanwhile (Parse, Bind, Execute, Sync) then run interleaved on the one session, where the
 * unnamed statement and portal are shared: one connection's Bind replaces another's portal, so a
 * statement comes back with no rows, or with `portal "" does not exist`, without having run. The
 * normal mode's completions after its own transactions are such statements (they came back empty:
 * `LeaseLost` at concurrency 16). With one connection nothing interleaves, and nothing is lost: the
 * backend runs one statement at a time whatever the pool.
 */
import { Idempotency } from "@effect-idempotency/core"
import {
  PgIdempotencyMigration,
  PgIdempotencyStore,
  PgIdempotencyTable,
  PgTransactional
} from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type { BenchError, Summary } from "./Measure.js"
import { pairedRatio, rotation, runBatch, summarize } from "./Measure.js"
import { countedPool, database } from "./PostgresBench.js"
import { Payload, payloadFor, Receipt } from "./Workload.js"

export const TRANSACTIONAL = "pg-transactional"
export const OWN_TRANSACTION = "pg-store+own-transaction"

export interface Result {
  readonly database: "server" | "pglite"
  /** The connections of the one pool both contenders share: `poolSize`, 1 on PGlite. */
  readonly poolSize: number
  readonly rounds: number
  readonly scenarios: ReadonlyArray<{
    readonly path: "first" | "replay"
    readonly concurrency: number
    readonly calls: number
    readonly contenders: Readonly<Record<string, Summary & { readonly roundTrips: number }>>
  }>
}

/**
 * Runs the comparison on the server at `url` with a pool of `poolSize`, or on PGlite with a pool of
 * one (see above); everything lives in a schema dropped at the end.
 */
export const run = (
  url: string | undefined,
  options: { readonly runId: string; readonly rounds: number; readonly calls: number; readonly poolSize: number }
): Effect.Effect<Result, BenchError> =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database(url)
    const poolSize = db.kind === "pglite" ? 1 : options.poolSize
    const sent = { statements: 0 }
    const { pool, query, schema: scopedSchema } = yield* countedPool(db.url, poolSize, sent)
    const runtime = yield* Effect.acquireRelease(
      Effect.sync(() => ManagedRuntime.make(PgClient.layerFromPool({ acquire: Effect.succeed(pool) }))),
      (runtime) => Effect.promise(() => runtime.dispose())
    )
    const schema = `bench_tx_${options.runId.replaceAll("-", "_")}`
    const quoted = PgIdempotencyTable.quote(schema)
    const table = Either.getOrThrow(PgIdempotencyTable.make({ schema, table: "records" }))
    yield* scopedSchema(schema)
    yield* query(PgIdempotencyMigration.toSql(table))
    yield* query(`CREATE TABLE ${quoted}.charges (id text PRIMARY KEY, amount_cents int NOT NULL)`)

    const insert = (payload: Payload) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.as(
          sql.unsafe(`INSERT INTO ${quoted}.charges (id, amount_cents) VALUES ($1, $2)`, [
            payload.customerId,
            payload.amountCents
          ]).withoutTransform,
          { chargeId: `ch_${payload.customerId}`, amountCents: payload.amountCents }
        ))

    const transactional = PgTransactional.make({
      name: "charge",
      table,
      payload: Payload,
      success: Receipt,
      execute: insert
    })
    const normal = Idempotency.make({
      name: "charge",
      payload: Payload,
      success: Receipt,
      execute: (payload: Payload) => Effect.flatMap(SqlClient.SqlClient, (sql) => sql.withTransaction(insert(payload)))
    })
    const storeRuntime = yield* Effect.acquireRelease(
      Effect.sync(() =>
        ManagedRuntime.make(
          PgIdempotencyStore.layerWith({ schema, table: "records" }).pipe(
            Layer.provideMerge(PgClient.layerFromPool({ acquire: Effect.succeed(pool) }))
          )
        )
      ),
      (runtime) => Effect.promise(() => runtime.dispose())
    )
    const contenders = [
      {
        name: TRANSACTIONAL,
        call: (key: string) => runtime.runPromise(transactional.run({ key, payload: payloadFor(key) }))
      },
      {
        name: OWN_TRANSACTION,
        call: (key: string) => storeRuntime.runPromise(normal.run({ key, payload: payloadFor(key) }))
      }
    ]

    const scenarios: Array<Result["scenarios"][number]> = []
    for (const concurrency of [1, 16]) {
      const batches: Record<string, Record<"first" | "replay", Array<{ batch: any; trips: number }>>> = {}
      for (let round = 0; round < options.rounds + 1; round++) {
        for (const contender of rotation(contenders, round)) {
          const keys = Array.from(
            { length: options.calls },
            (_, i) => `${options.runId}-${contender.name}-${concurrency}-${round}-${i}`
          )
          for (const path of ["first", "replay"] as const) {
            const before = sent.statements
            const batch = yield* runBatch(options.calls, concurrency, (i) => contender.call(keys[i]!))
            // round 0 warms up
            if (round === 0) continue
            const slot = (batches[contender.name] ??= { first: [], replay: [] })
            slot[path].push({ batch, trips: (sent.statements - before) / options.calls })
          }
        }
      }
      for (const path of ["first", "replay"] as const) {
        scenarios.push({
          path,
          concurrency,
          calls: options.calls,
          contenders: Object.fromEntries(
            contenders.map((contender) => {
              const runs = batches[contender.name]![path]
              return [contender.name, { ...summarize(runs.map((run) => run.batch)), roundTrips: runs[0]!.trips }]
            })
          )
        })
      }
    }
    return { database: db.kind, poolSize, rounds: options.rounds, scenarios }
  }))

const fixed = (n: number, digits = 0) => n.toFixed(digits)

/** The section of BENCHMARKS.md. */
export const markdown = (result: Result): string => {
  const rows = result.scenarios.flatMap((scenario) =>
    Object.entries(scenario.contenders).map(([name, summary]) =>
      `| ${scenario.path} | ${scenario.concurrency} | ${name} | ${fixed(summary.throughput)} | ${
        fixed(summary.p50, 2)
      } | ${fixed(summary.p99, 2)} | ${fixed(summary.roundTrips, 1)} |`
    )
  )
  const ratio = (path: "first" | "replay", concurrency: number) => {
    const scenario = result.scenarios.find((s) => s.path === path && s.concurrency === concurrency)
    const tx = scenario?.contenders[TRANSACTIONAL]
    const own = scenario?.contenders[OWN_TRANSACTION]
    // the median of the per-round ratios, as every other ratio of the report
    return tx === undefined || own === undefined ? "n/a" : `${fixed(pairedRatio(tx.rounds, own.rounds), 2)}×`
  }
  const pool = result.database === "pglite"
    ? "one connection (PGlite is one backend, and its socket server\ninterleaves the statements of concurrent connections: bench/README.md)"
    : `a pool of ${result.poolSize}`
  return `## PostgreSQL (${result.database}): the transactional mode

\`${TRANSACTIONAL}\` runs the reservation, one user INSERT and the completion in one transaction
(\`PgTransactional\`); \`${OWN_TRANSACTION}\` is the normal mode whose downstream runs the same INSERT in
a transaction of its own. ${result.rounds} rounds after a warm-up; round trips are the statements sent per
call. Both contenders share ${pool}.
Throughput of the transactional mode relative to the other: first executions ${ratio("first", 1)} at
concurrency 1, ${ratio("first", 16)} at 16; replays ${ratio("replay", 1)} and ${ratio("replay", 16)}.

| path | concurrency | contender | calls/s | p50 ms | p99 ms | round trips |
| --- | --- | --- | --- | --- | --- | --- |
${rows.join("\n")}
`
}
