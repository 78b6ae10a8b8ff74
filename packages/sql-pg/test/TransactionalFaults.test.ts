/**
 * The transactional mode when the database stops answering, through a proxy in front of the test
 * database: the shared faults suite of `@effect-idempotency/test-support`.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import * as TransactionalSuite from "@effect-idempotency/test-support/TransactionalSuite"
import { TcpProxy } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { transactionalCounts } from "./utils/fixtures.js"
import { layerClient, layerPrimary, resetTable, runTable, TestDatabase } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx_faults")
const ORDERS = runTable("orders_tx_faults")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))

const Live = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* resetTable({ table: TABLE })
    yield* sql.unsafe(`DROP TABLE IF EXISTS ${ORDERS}`)
    yield* sql.unsafe(`CREATE TABLE ${ORDERS} (id text PRIMARY KEY, key text NOT NULL)`)
  })
).pipe(
  Layer.provideMerge(layerClient()),
  Layer.provideMerge(layerPrimary)
)

TransactionalSuite.faults("PgTransactional faults", Live, {
  proxied: Effect.gen(function*() {
    const database = yield* TestDatabase
    const proxy = yield* TcpProxy.make(database)
    const url = new URL(database.url)
    url.host = `127.0.0.1:${proxy.port}`
    const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url.toString()), maxConnections: 4 }))
    return { proxy, context }
  }),
  operation: (name, execute, settings) =>
    PgTransactional.make({
      name,
      table,
      payload: Schema.Struct({ n: Schema.Int }),
      success: Schema.String,
      execute: () => execute,
      ...settings
    }),
  insertOrder: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const context = yield* IdempotencyContext.IdempotencyContext
    yield* sql`INSERT INTO ${sql(ORDERS)} (id, key) VALUES (${randomUUID()}, ${context.key})`
  }),
  counts: transactionalCounts(ORDERS, table.qualified)
})
