/**
 * The CLI on SQLite: a database file in a temporary directory, which the tests open with the same
 * driver as the CLI (better-sqlite3). The scenario names it `sqlite:///<absolute path>`; the other
 * tests `sqlite:<path>`, relative to the working directory, and a CLI without its optional driver.
 */
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { layerClient, scopedDatabaseFile } from "../../sql/test/utils/databases.js"
import { cli, Code, parsed } from "./utils/cli.js"
import { CliStore, scenario } from "./utils/scenario.js"

/** Loaded into the CLI's process: `@effect/sql-sqlite-node` cannot be imported there. */
const WITHOUT_SQLITE_NODE = fileURLToPath(new URL("./utils/withoutSqliteNode.mjs", import.meta.url))

scenario("effect-idempotency on SQLite", {
  layer: Layer.unwrapScoped(
    Effect.map(scopedDatabaseFile, (file) =>
      Layer.mergeAll(
        SqlIdempotencyStore.layerWith().pipe(Layer.provide(layerClient("sqlite", { file }))),
        Layer.succeed(CliStore, { args: ["--store", `sqlite://${file}`] })
      ))
  ),
  migrated: { applied: true }
})

describe("effect-idempotency on a SQLite file", () => {
  it.scopedLive("a new file: a store error that says to migrate, then migrate creates the table, by a relative path", () =>
    Effect.gen(function*() {
      const file = yield* scopedDatabaseFile
      // the CLI runs in this process's working directory
      const store = ["--store", `sqlite:${path.relative(process.cwd(), file)}`, "--table", "cli_records"]
      const before = yield* cli(["list", "--json", ...store])
      assert.strictEqual(before.code, Code.StoreError, before.stdout + before.stderr)
      assert.include(parsed(before).error.message, "effect-idempotency migrate")
      const migrated = yield* cli(["migrate", "--json", ...store])
      assert.strictEqual(migrated.code, Code.Ok, migrated.stderr)
      assert.deepInclude(parsed(migrated), { store: "Sqlite", applied: true })
      assert.include(parsed(migrated).detail, "the table cli_records")
      const after = yield* cli(["list", "--json", ...store])
      assert.strictEqual(after.code, Code.Ok, after.stderr)
      assert.deepStrictEqual(parsed(after), { records: [], cursor: null })
    }))

  it.scopedLive("without @effect/sql-sqlite-node, sqlite: exits 1 saying to install it, and opens nothing", () =>
    Effect.gen(function*() {
      const file = yield* scopedDatabaseFile
      const run = yield* cli(["migrate", "--json", "--store", `sqlite:${file}`], {
        env: { NODE_OPTIONS: `--import=${WITHOUT_SQLITE_NODE}` }
      })
      assert.strictEqual(run.code, Code.Usage, run.stdout + run.stderr)
      assert.strictEqual(parsed(run).error._tag, "InvalidStore")
      assert.include(parsed(run).error.message, "npm i @effect/sql-sqlite-node")
      assert.isFalse(fs.existsSync(file))
    }))

  it.live("a file that cannot be opened is unavailable (exit 3); a sqlite:// URL with a host is refused (exit 1)", () =>
    Effect.gen(function*() {
      const [missingDir, withHost] = yield* Effect.all([
        cli(["stats", "--json", "--store", "sqlite:/nonexistent-effect-idempotency-dir/records.db"]),
        cli(["stats", "--json", "--store", "sqlite://db.internal/records.db"])
      ], { concurrency: 2 })
      assert.strictEqual(missingDir.code, Code.Unavailable, missingDir.stdout + missingDir.stderr)
      assert.strictEqual(parsed(missingDir).error._tag, "StoreUnavailable")
      assert.strictEqual(withHost.code, Code.Usage, withHost.stdout + withHost.stderr)
      assert.strictEqual(parsed(withHost).error._tag, "InvalidStore")
    }))
})
