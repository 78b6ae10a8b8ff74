/**
 * The transactional mode's process killed (SIGKILL) at every point of its transaction, then a retry,
 * on MariaDB, SQLite (better-sqlite3) and libSQL (a file): the user's rows and the record are both
 * there exactly once (the retry replays) or both absent (the retry executes once), counted from the
 * database (the suite of `StoreKill`). The child process is `utils/transactionalChild.ts`.
 */
import { SqlIdempotencyMigration, SqlTransactional } from "@effect-idempotency/sql"
import { Children } from "@effect-idempotency/test-support"
import * as StoreKill from "@effect-idempotency/test-support/StoreKill"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, inject } from "vitest"
import type { Engine } from "./utils/databases.js"
import { createOrders, engines, layerClient, transactionalCounts, uniqueTable } from "./utils/databases.js"

const CHILD = fileURLToPath(new URL("./utils/transactionalChild.ts", import.meta.url))

const suite = (engine: Engine) => {
  const TABLE = uniqueTable("idem_tx_kill")
  const ORDERS = uniqueTable("orders_tx_kill")
  // SQLite and libSQL: a file both processes open
  const file = engine === "mariadb"
    ? undefined
    : path.join(fs.mkdtempSync(path.join(os.tmpdir(), "effect-idempotency-sql-kill-")), "records.db")
  const database = file ?? inject("mysqlUrl")

  const Live = Layer.effectDiscard(
    Effect.zipRight(SqlIdempotencyMigration.migrate({ table: TABLE }), createOrders(engine, ORDERS))
  ).pipe(
    Layer.provideMerge(layerClient(engine, file === undefined ? { maxConnections: 4 } : { file })),
    Layer.orDie
  )

  if (file !== undefined) afterAll(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }))

  StoreKill.suite(`SqlTransactional killed (${engine})`, Live, {
    child: CHILD,
    args: (key, point) => Effect.succeed([engine, database, TABLE, ORDERS, key, point]),
    counts: transactionalCounts(engine, ORDERS, TABLE),
    retry: (key, started) =>
      SqlTransactional.make({ ...Children.killOrder(ORDERS, key, { started }), table: TABLE })
        .runDetailed({ key, payload: Children.killPayload })
  })
}

for (const engine of engines) suite(engine)
