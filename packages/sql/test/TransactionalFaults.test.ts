/**
 * The transactional mode when MariaDB stops answering, through a proxy in front of the run's
 * database: the shared faults suite of `@effect-idempotency/test-support`. MariaDB rolls back a cut
 * connection's transaction once it notices the cut.
 */
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import * as TransactionalSuite from "@effect-idempotency/test-support/TransactionalSuite"
import { TcpProxy } from "@effect-idempotency/testing"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { inject } from "vitest"
import { createOrders, layerClient, transactionalCounts, uniqueTable } from "./utils/databases.js"

const TABLE = uniqueTable("idem_tx_faults")
const ORDERS = uniqueTable("orders_tx_faults")

const Live = Layer.effectDiscard(
  Effect.zipRight(SqlIdempotencyMigration.migrate({ table: TABLE }), createOrders("mariadb", ORDERS))
).pipe(Layer.provideMerge(layerClient("mariadb")), Layer.orDie)

TransactionalSuite.faults("SqlTransactional faults (mariadb)", Live, {
  proxied: Effect.gen(function*() {
    const url = new URL(inject("mysqlUrl"))
    const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: Number(url.port) })
    url.port = String(proxy.port)
    const context = yield* Layer.build(MysqlClient.layer({ url: Redacted.make(url.toString()), maxConnections: 4 }))
    return { proxy, context }
  }).pipe(Effect.orDie),
  operation: (name, execute, settings) =>
    SqlTransactional.make({ ...TransactionalSuite.faultsOperation(name, execute, settings), table: TABLE }),
  insertOrder: TransactionalSuite.insertKeyOrder(ORDERS),
  counts: transactionalCounts("mariadb", ORDERS, TABLE),
  rollsBackCutLater: true
})
