/**
 * A consumer killed with SIGKILL (a child process: `utils/rabbitChild.ts`, `utils/jetstreamChild.ts`)
 * before its handler, inside it, after its write and before its acknowledgement, its charges and
 * records in one transaction (`utils/pgOrSqliteInbox.ts`) on a SQLite file or on PostgreSQL (the
 * server `TEST_PG_URL` names, else PGlite served to the children by this process). A second child
 * then consumes until the message is acknowledged: one charge, counted from the charges table, and
 * the queue (or the durable) holds nothing, not even unacknowledged.
 */
import { SqlIdempotencyMigration } from "@effect-idempotency/sql"
import { PgIdempotencyMigration } from "@effect-idempotency/sql-pg"
import * as Children from "@effect-idempotency/test-support/Children"
import * as Postgres from "@effect-idempotency/test-support/Postgres"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, inject, layer } from "@effect/vitest"
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Connection } from "rabbitmq-client"
import { eventually } from "./utils/eventually.js"
import { NatsServer, NatsServerLive, testStream } from "./utils/nats.js"
import { POINTS, sqlitePrefix } from "./utils/pgOrSqliteInbox.js"

type Charges = ReadonlyArray<{ readonly order_id: string }>

/** The database of a test: the children's arguments (database, records, charges) and the charges. */
interface Store {
  readonly args: ReadonlyArray<string>
  readonly charges: Effect.Effect<Charges>
}

/** The queue of a test, holding one order: the child's arguments before the store's, and whether it is empty. */
interface Transport {
  readonly child: string
  readonly args: ReadonlyArray<string>
  readonly settled: Effect.Effect<void, Error>
}

const CREATE_CHARGES = (table: string) =>
  `CREATE TABLE ${table} (charge_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount_cents INTEGER NOT NULL)`

/** Runs `f` on a connection of its own to the file, closed at once: the test holds no lock between steps. */
const withFile = <A>(filename: string, f: (db: Database.Database) => A) =>
  Effect.sync(() => {
    const db = new Database(filename, { timeout: 5000 })
    try {
      return f(db)
    } finally {
      db.close()
    }
  })

const sqlite: Effect.Effect<Store, never, Scope.Scope> = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "idem-queue-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  const filename = path.join(dir, "orders.db")
  yield* withFile(filename, (db) => {
    for (const statement of Either.getOrThrow(SqlIdempotencyMigration.statements("sqlite"))) db.exec(statement)
    db.exec(CREATE_CHARGES("charges"))
  })
  return {
    args: [`${sqlitePrefix}${filename}`, "idempotency_records", "charges"],
    charges: withFile(filename, (db) => db.prepare("SELECT order_id FROM charges").all() as Charges)
  }
})

/** Tables of the test's own on the suite's PostgreSQL, dropped with the scope. */
const postgres: Effect.Effect<Store, never, Scope.Scope | SqlClient.SqlClient | Postgres.TestDatabase> = Effect.gen(
  function*() {
    const sql = yield* SqlClient.SqlClient
    const { url } = yield* Postgres.TestDatabase
    const suffix = randomUUID().slice(0, 8)
    const records = `idem_kill_${suffix}`
    const charges = `charges_kill_${suffix}`
    yield* Effect.acquireRelease(
      Effect.zipRight(PgIdempotencyMigration.migration({ table: records }), sql.unsafe(CREATE_CHARGES(charges))),
      () =>
        Effect.ignore(Effect.all([
          sql.unsafe(`DROP TABLE IF EXISTS ${charges}`),
          sql.unsafe(`DROP TABLE IF EXISTS ${records}`),
          sql.unsafe(`DROP FUNCTION IF EXISTS ${records}_reserve`)
        ]))
    ).pipe(Effect.orDie)
    return {
      args: [url, records, charges],
      charges: sql<{ readonly order_id: string }>`SELECT order_id FROM ${sql(charges)}`.pipe(Effect.orDie)
    }
  }
)

/** A quorum queue of the test's own with one order in it; empty once no consumer holds it and nothing is ready. */
const rabbitMq: Effect.Effect<Transport, never, Scope.Scope> = Effect.gen(function*() {
  const url = inject("amqpUrl")
  const connection = yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const connection = new Connection(url)
      connection.on("error", () => {})
      await connection.onConnect(10_000)
      return connection
    }),
    (connection) => Effect.promise(() => connection.close())
  )
  const queue = `idem-kill-${randomUUID().slice(0, 8)}`
  yield* Effect.acquireRelease(
    Effect.promise(() => connection.queueDeclare({ queue, durable: true, arguments: { "x-queue-type": "quorum" } })),
    () => Effect.promise(() => connection.queueDelete({ queue })).pipe(Effect.ignore)
  )
  yield* Effect.acquireUseRelease(
    Effect.sync(() => connection.createPublisher({ confirm: true })),
    (publisher) =>
      Effect.promise(() =>
        publisher.send(
          { routingKey: queue, messageId: "order-1", contentType: "application/json", durable: true },
          { orderId: "order-1", amountCents: 1999 }
        )
      ),
    (publisher) => Effect.promise(() => publisher.close())
  )
  const declared = Effect.promise(() => connection.queueDeclare({ queue, passive: true }))
  return {
    child: fileURLToPath(new URL("./utils/rabbitChild.ts", import.meta.url)),
    args: [url, queue],
    // once the broker has seen the last child die, an unacknowledged message would be ready again
    settled: Effect.gen(function*() {
      yield* eventually("no consumer left", Effect.map(declared, ({ consumerCount }) => consumerCount === 0))
      assert.strictEqual((yield* declared).messageCount, 0)
    })
  }
})

/** A stream and durable of the test's own with one order in it; the durable redelivers 2 seconds after a kill. */
const jetStream: Effect.Effect<Transport, Error, Scope.Scope | NatsServer> = Effect.gen(function*() {
  const stream = yield* testStream("kill", { ack_wait: 2_000_000_000 })
  assert.isTrue(yield* stream.publish("order-1", { orderId: "order-1", amountCents: 1999 }))
  return {
    child: fileURLToPath(new URL("./utils/jetstreamChild.ts", import.meta.url)),
    args: [(yield* NatsServer).url, stream.stream, stream.durable],
    settled: Effect.map(stream.info, (info) => {
      assert.strictEqual(info.num_pending, 0)
      assert.strictEqual(info.num_ack_pending, 0)
      assert.strictEqual(info.ack_floor.stream_seq, 1)
    })
  }
})

/** The suite's NATS server, and its PostgreSQL with a client on it. */
const Live = Layer.mergeAll(
  NatsServerLive,
  Layer.unwrapEffect(
    Effect.map(Postgres.TestDatabase, ({ url }) => PgClient.layer({ url: Redacted.make(url), maxConnections: 2 }))
  ).pipe(Layer.provideMerge(Postgres.layerPrimary))
)

const transports = [["RabbitMQ", rabbitMq], ["JetStream", jetStream]] as const
const stores = [["SQLite", sqlite], ["PostgreSQL", postgres]] as const

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })(
  "a consumer killed with SIGKILL, its charges and records in one transaction",
  (it) => {
    for (const [transportName, transport] of transports) {
      for (const [storeName, store] of stores) {
        for (const point of POINTS) {
          it.scoped(
            `${transportName}, ${storeName}, at ${point}: the message comes back, and there is one charge`,
            () =>
              Effect.gen(function*() {
                const { charges, args: storeArgs } = yield* store
                const { args: queueArgs, child, settled } = yield* transport
                const args = [...queueArgs, ...storeArgs]
                assert.strictEqual(yield* Children.runUntilMarker(child, [...args, point]), `PAUSED ${point} (SIGKILL)`)
                // what the killed process left: nothing uncommitted survives it
                assert.strictEqual((yield* charges).length, point === "before-ack" ? 1 : 0)
                assert.match(yield* Children.runUntilMarker(child, [...args, "finish"]), /^DONE/)
                assert.deepStrictEqual(yield* charges, [{ order_id: "order-1" }])
                yield* settled
              }),
            // each test has its own queue or stream and its own tables: several run at once
            { timeout: 120_000, concurrent: true }
          )
        }
      }
    }
  }
)
