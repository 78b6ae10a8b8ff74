/**
 * The SQL store's README snippet on a local libSQL file: the program twice (the table made by the
 * layer's migration); the second run is a replay and one record is stored.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { strictEqual } from "node:assert"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { runTwiceThenReplay } from "./embedded.mjs"
import { createOrder, program, SqlLive, StoreLive } from "./snippets/sql.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "consumer-sql-"))
process.env.LIBSQL_URL = `file:${path.join(dir, "records.db")}`

try {
  const first = await runTwiceThenReplay({ createOrder, program, StoreLive })
  const rows = await Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*) AS n FROM idempotency_records`)
      .pipe(Effect.provide(SqlLive))
  )
  strictEqual(Number(rows[0]?.n), 1, "one record")
  console.log(`sql: ${JSON.stringify(first)} recorded once on a libSQL file, then replayed`)
} finally {
  fs.rmSync(dir, { recursive: true, force: true })
}
