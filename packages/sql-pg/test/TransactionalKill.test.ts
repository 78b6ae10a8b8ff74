/**
 * The transactional mode's process killed (SIGKILL) at every point of its transaction, then a
 * retry: the user's rows and the record are both there exactly once (the retry replays) or both
 * absent (the retry executes once), counted from the database (the suite of `StoreKill`).
 *
 * The child process (`utils/transactionalChild.ts`) connects to the test database: the server
 * named by `TEST_PG_URL`, or the PGlite of this process through its socket server (which rolls a
 * dead connection's transaction back, as the server does).
 */
import { PgIdempotencyTable, PgTransactional } from "@effect-idempotency/sql-pg"
import { Children } from "@effect-idempotency/test-support"
import * as StoreKill from "@effect-idempotency/test-support/StoreKill"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { fileURLToPath } from "node:url"
import { transactionalCounts } from "./utils/fixtures.js"
import { layerSetUp, resetOrderTables, runTable, TestDatabase } from "./utils/TestDatabase.js"

const TABLE = runTable("idem_tx_kill")
const ORDERS = runTable("orders_tx_kill")
const table = Either.getOrThrow(PgIdempotencyTable.make({ table: TABLE }))

const Live = layerSetUp(resetOrderTables(TABLE, ORDERS), { maxConnections: 4 })

StoreKill.suite("PgTransactional killed", Live, {
  child: fileURLToPath(new URL("./utils/transactionalChild.ts", import.meta.url)),
  args: (key, point) => Effect.map(TestDatabase, (database) => [database.url, TABLE, ORDERS, key, point]),
  counts: transactionalCounts(ORDERS, table.qualified),
  retry: (key, started) =>
    PgTransactional.make({ ...Children.killOrder(ORDERS, key, { started }), table }).runDetailed({
      key,
      payload: Children.killPayload
    })
})
