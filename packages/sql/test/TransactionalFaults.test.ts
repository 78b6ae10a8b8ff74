/**
 * The transactional mode when MariaDB stops answering, through a proxy in front of the run's
 * database: the shared faults suite of `@effect-idempotency/test-support`. MariaDB rolls back a cut
 * connection's transaction once it notices the cut.
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import * as TransactionalSuite from "@effect-idempotency/test-support/TransactionalSuite"
import { TcpProxy } from "@effect-idempotency/testing"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import { layerClient, transactionalCounts, uniqueTable } from "./utils/databases.js"

const TABLE = uniqueTable("idem_tx_faults")
const ORDERS = uniqueTable("orders_tx_faults")

const Live = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* SqlIdempotencyMigration.migrate({ table: TABLE })
    yield* sql.unsafe(`CREATE TABLE ${ORDERS} (id VARCHAR(64) PRIMARY KEY, \`key\` VARCHAR(64) NOT NULL)`)
  })
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
    SqlTransactional.make({
      name,
      table: TABLE,
      payload: Schema.Struct({ n: Schema.Int }),
      success: Schema.String,
      execute: () => execute,
      ...settings
    }),
  insertOrder: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const context = yield* IdempotencyContext.IdempotencyContext
    yield* sql.unsafe(`INSERT INTO ${ORDERS} (id, \`key\`) VALUES (?, ?)`, [randomUUID(), context.key])
  }),
  counts: transactionalCounts("mariadb", ORDERS, TABLE),
  rollsBackCutLater: true
})
