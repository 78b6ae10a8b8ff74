/**
 * The transactional mode when the database stops answering, through a proxy in front of the test
 * database: the shared faults suite of `@effect-idempotency/test-support`.
 */
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import * as TransactionalSuite from "@effect-idempotency/test-support/TransactionalSuite"
import { TcpProxy } from "@effect-idempotency/testing"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { transactionalCounts } from "./utils/fixtures.js"
import { layerSetUp, resetOrderTables, runTable, TestDatabase } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx_faults")
const ORDERS = runTable("orders_tx_faults")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))

const Live = layerSetUp(resetOrderTables(TABLE, ORDERS))

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
    PgTransactional.make({ ...TransactionalSuite.faultsOperation(name, execute, settings), table }),
  insertOrder: TransactionalSuite.insertKeyOrder(ORDERS),
  counts: transactionalCounts(ORDERS, table.qualified)
})
