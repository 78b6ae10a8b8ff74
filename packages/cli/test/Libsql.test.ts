/**
 * The CLI on libSQL: a local database file in a temporary directory, named `file:<path>`, which the
 * tests open with the same driver as the CLI (`@libsql/client`).
 */
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerClient, scopedDatabaseFile } from "../../sql/test/utils/databases.js"
import { cli, Code, parsed } from "./utils/cli.js"
import { CliStore, scenario } from "./utils/scenario.js"

scenario("effect-idempotency on libSQL", {
  layer: Layer.unwrapScoped(
    Effect.map(scopedDatabaseFile, (file) =>
      Layer.mergeAll(
        SqlIdempotencyStore.layerWith({ table: "cli_records" }).pipe(Layer.provide(layerClient("libsql", { file }))),
        Layer.succeed(CliStore, { args: ["--store", `file:${file}`, "--table", "cli_records"] })
      ))
  ),
  migrated: { applied: true }
})

describe("effect-idempotency on a libSQL file", () => {
  it.scopedLive("a new file: a store error that says to migrate, then migrate creates the table (IDEMPOTENCY_TABLE)", () =>
    Effect.gen(function*() {
      const file = yield* scopedDatabaseFile
      const options = { env: { IDEMPOTENCY_TABLE: "cli_env_records" } }
      const before = yield* cli(["stats", "--json", "--store", `file:${file}`], options)
      assert.strictEqual(before.code, Code.StoreError, before.stdout + before.stderr)
      assert.include(parsed(before).error.message, "effect-idempotency migrate")
      const migrated = yield* cli(["migrate", "--json", "--store", `file:${file}`], options)
      assert.strictEqual(migrated.code, Code.Ok, migrated.stderr)
      assert.deepInclude(parsed(migrated), { store: "Libsql", applied: true })
      assert.include(parsed(migrated).detail, "the table cli_env_records")
      const after = yield* cli(["stats", "--json", "--store", `file:${file}`], options)
      assert.strictEqual(after.code, Code.Ok, after.stderr)
      assert.deepStrictEqual(parsed(after), { counts: [] })
    }))

  it.live("a URL the libSQL client refuses exits 1 without echoing it", () =>
    Effect.gen(function*() {
      const run = yield* cli(["stats", "--json", "--store", "libsql://db.internal?authToken=s3cret-token&unknown=1"])
      assert.strictEqual(run.code, Code.Usage, run.stdout + run.stderr)
      assert.strictEqual(parsed(run).error._tag, "InvalidStore")
      assert.notInclude(run.stdout + run.stderr, "s3cret-token")
    }))
})
