/**
 * The CLI on MariaDB: a database of the run's own on the server `TEST_MYSQL_URL` names, else on a
 * `mariadbd` the run starts (the SQL store's global setup). The scenario names the store with a
 * `mariadb://` URL, which the CLI hands to the MySQL client as `mysql://`; the table is the CLI's
 * own `migrate`'s, on a `mysql://` URL too.
 */
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { inject } from "vitest"
import { layerClient, uniqueTable } from "../../sql/test/utils/databases.js"
import { cli, Code, parsed } from "./utils/cli.js"
import { CliStore, scenario } from "./utils/scenario.js"

const mysqlUrl = inject("mysqlUrl")
const mariadbUrl = mysqlUrl.replace(/^mysql:/, "mariadb:")
const table = uniqueTable("cli_records")

scenario("effect-idempotency on MariaDB", {
  layer: Layer.mergeAll(
    SqlIdempotencyStore.layerWith({ table }).pipe(Layer.provide(layerClient("mariadb", { maxConnections: 2 }))),
    Layer.succeed(CliStore, { args: ["--store", mariadbUrl, "--table", table] })
  ),
  migrated: { applied: true }
})

describe("effect-idempotency migrate on MariaDB", () => {
  it.live("a table never migrated is a store error that says to migrate; migrate creates it, and again finds it", () =>
    Effect.gen(function*() {
      const table = uniqueTable("cli_migrate")
      const store = ["--store", mysqlUrl, "--table", table]
      const before = yield* cli(["stats", "--json", ...store])
      assert.strictEqual(before.code, Code.StoreError, before.stdout + before.stderr)
      assert.strictEqual(parsed(before).error._tag, "StoreError")
      assert.include(parsed(before).error.message, "effect-idempotency migrate")
      for (let i = 0; i < 2; i++) {
        const run = yield* cli(["migrate", "--json", ...store])
        assert.strictEqual(run.code, Code.Ok, run.stderr)
        assert.deepInclude(parsed(run), { store: "MariaDb", applied: true })
        assert.include(parsed(run).detail, `the table ${table}`)
      }
      const after = yield* cli(["stats", "--json", ...store])
      assert.strictEqual(after.code, Code.Ok, after.stderr)
      assert.deepStrictEqual(parsed(after), { counts: [] })
    }))

  it.live("an invalid table name exits 1 before the server is asked, without echoing it; --admin-index is refused", () =>
    Effect.gen(function*() {
      const name = `records; DROP TABLE x ${"y".repeat(5000)}`
      const [invalid, adminIndex] = yield* Effect.all([
        cli(["migrate", "--json", "--store", mariadbUrl, "--table", name]),
        cli(["migrate", "--admin-index", "--json", "--store", mariadbUrl, "--table", table])
      ], { concurrency: 2 })
      for (const run of [invalid, adminIndex]) {
        assert.strictEqual(run.code, Code.Usage, run.stdout + run.stderr)
        assert.strictEqual(parsed(run).error._tag, "InvalidStore")
      }
      assert.notInclude(invalid.stdout + invalid.stderr, "DROP TABLE")
      assert.isBelow(invalid.stdout.length + invalid.stderr.length, 1000)
    }))
})
