import * as Children from "@effect-idempotency/test-support/Children"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const CHILD = fileURLToPath(new URL("./utils/checkoutChild.ts", import.meta.url))

/** A SQLite file with the bank's tables, and the client the test reads it with. */
const database = Effect.gen(function*() {
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "idem-workflow-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  const filename = path.join(dir, "checkout.db")
  const sql = yield* SqliteClient.make({ filename }).pipe(Effect.provide(Reactivity.layer))
  yield* sql`CREATE TABLE charges (charge_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, amount_cents INTEGER NOT NULL, idempotency_key TEXT NOT NULL)`
  yield* sql`CREATE TABLE receipts (order_id TEXT NOT NULL, charge_id TEXT NOT NULL)`
  return { filename, sql }
})

const rows = (sql: SqlClient.SqlClient) =>
  Effect.all({
    charges: sql<{ readonly charge_id: string; readonly order_id: string }>`SELECT charge_id, order_id FROM charges`,
    receipts: sql<{ readonly charge_id: string }>`SELECT charge_id FROM receipts`
  })

describe("a workflow process killed with SIGKILL", () => {
  it.scoped(
    "after the activity charged and before the workflow ended: the re-run replays, one charge",
    () =>
      Effect.gen(function*() {
        const { filename, sql } = yield* database
        assert.strictEqual(
          yield* Children.runUntilMarker(CHILD, [filename, "order-1", "after-charge"]),
          "PAUSED after-charge (SIGKILL)"
        )
        const charged = yield* rows(sql)
        assert.strictEqual(charged.charges.length, 1)
        assert.deepStrictEqual(charged.receipts, [])
        assert.match(yield* Children.runUntilMarker(CHILD, [filename, "order-1", "finish"]), /^DONE/)
        const { charges, receipts } = yield* rows(sql)
        assert.deepStrictEqual(charges, charged.charges)
        assert.deepStrictEqual(receipts, [{ charge_id: charged.charges[0]!.charge_id }])
      }),
    { timeout: 60_000 }
  )

  it.scoped(
    "inside the activity, before it charged: the re-run takes the key over when its lease ends, one charge",
    () =>
      Effect.gen(function*() {
        const { filename, sql } = yield* database
        assert.strictEqual(
          yield* Children.runUntilMarker(CHILD, [filename, "order-2", "inside-charge"]),
          "PAUSED inside-charge (SIGKILL)"
        )
        assert.deepStrictEqual((yield* rows(sql)).charges, [])
        assert.match(yield* Children.runUntilMarker(CHILD, [filename, "order-2", "finish"]), /^DONE/)
        const { charges, receipts } = yield* rows(sql)
        assert.strictEqual(charges.length, 1)
        assert.deepStrictEqual(receipts, [{ charge_id: charges[0]!.charge_id }])
      }),
    { timeout: 60_000 }
  )
})
