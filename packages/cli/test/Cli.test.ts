/**
 * The command line itself, as a process: help on every command, usage errors and their exit code,
 * the store named by the environment, and a store that cannot be reached.
 */
import { freePort } from "@effect-idempotency/test-support/Servers"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { redisUrl } from "../../redis/test/utils/fixtures.js"
import { cli, Code, parsed } from "./utils/cli.js"

const commands = ["inspect", "list", "unblock", "stats", "purge", "migrate"]

describe("effect-idempotency", () => {
  it.live("--help on the root and on every command exits 0 and describes it", () =>
    Effect.gen(function*() {
      const runs = yield* Effect.forEach(
        [[], ...commands.map((command) => [command])],
        (args) => Effect.map(cli([...args, "--help"]), (run) => ({ args, run })),
        { concurrency: 4 }
      )
      for (const { args, run } of runs) {
        assert.strictEqual(run.code, Code.Ok, `${args.join(" ")} --help: ${run.stderr}`)
        assert.include(run.stdout, "USAGE")
        if (args.length === 0) { for (const command of commands) assert.include(run.stdout, `- ${command} `) }
        else assert.include(run.stdout, `--json`)
      }
    }))

  it.live("usage errors exit 1 before any store is asked: an unknown command, a missing option, an invalid duration or key", () =>
    Effect.gen(function*() {
      const runs = yield* Effect.all([
        cli(["resurrect"]),
        cli(["unblock", "create-order", "key-1", "--reason", "INC-1", "--store", redisUrl]),
        cli(["list", "--older-than", "soon", "--store", redisUrl, "--json"]),
        cli(["list", "--limit", "5000", "--store", redisUrl]),
        // PostgreSQL's only: refused before the store is asked (nothing listens at the endpoint)
        cli(["migrate", "--admin-index", "--json", "--store", redisUrl]),
        cli([
          "migrate",
          "--admin-index",
          "--json",
          "--store",
          "dynamodb://t?region=us-east-1&endpoint=http://127.0.0.1:1"
        ], {
          env: { AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" }
        }),
        // nothing listens there: the key is refused first
        cli([
          "unblock",
          "create-order",
          "bad key",
          "--reason",
          "r",
          "--expect-attempt",
          "1",
          "--store",
          "postgres://x@127.0.0.1:1/x"
        ])
      ], { concurrency: 4 })
      for (const run of runs) assert.strictEqual(run.code, Code.Usage, run.stdout + run.stderr)
      assert.strictEqual(parsed(runs[2]).error._tag, "Usage")
      for (const run of [runs[4], runs[5]]) assert.strictEqual(parsed(run).error._tag, "InvalidStore")
    }))

  it.live("a store that is not named, or named by a URL of no known scheme, exits 1 without echoing it", () =>
    Effect.gen(function*() {
      const [none, unknown, both] = yield* Effect.all([
        cli(["stats", "--json"]),
        cli(["stats", "--json", "--store", "mongodb://admin:s3cret-password@db.internal/app"]),
        cli(["stats", "--json"], { env: { DATABASE_URL: "postgres://127.0.0.1/x", REDIS_URL: redisUrl } })
      ], { concurrency: 3 })
      for (const run of [none, unknown, both]) {
        assert.strictEqual(run.code, Code.Usage, run.stderr)
        assert.strictEqual(parsed(run).error._tag, "InvalidStore")
      }
      assert.notInclude(unknown.stdout + unknown.stderr, "s3cret-password")
    }))

  it.live("without --store, REDIS_URL names the store", () =>
    Effect.gen(function*() {
      const run = yield* cli(["list", "--limit", "1", "--json", "--prefix", "effect-idempotency-cli-env:"], {
        env: { REDIS_URL: redisUrl }
      })
      assert.strictEqual(run.code, Code.Ok, run.stderr)
      assert.deepStrictEqual(parsed(run), { records: [], cursor: null })
    }))

  it.live("a store that refuses connections exits 3 within seconds, on each kind of store", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const runs = yield* Effect.all([
        cli(["stats", "--json", "--store", `postgres://postgres:pw@127.0.0.1:${port}/test`]),
        cli(["stats", "--json", "--store", `redis://:pw@127.0.0.1:${port}`]),
        cli(["stats", "--json", "--store", `mysql://root:pw@127.0.0.1:${port}/app`]),
        cli(["stats", "--json", "--store", `mariadb://root:pw@127.0.0.1:${port}/app`]),
        cli(["stats", "--json", "--store", `libsql://127.0.0.1:${port}?tls=0`], { env: { LIBSQL_AUTH_TOKEN: ":pw@" } }),
        cli(["stats", "--json", "--store", `dynamodb://t?region=us-east-1&endpoint=http://127.0.0.1:${port}`], {
          env: { AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" }
        })
      ], { concurrency: 3 })
      for (const run of runs) {
        assert.strictEqual(run.code, Code.Unavailable, run.stdout + run.stderr)
        assert.strictEqual(parsed(run).error._tag, "StoreUnavailable")
        assert.isBelow(run.millis, 15_000)
        assert.notInclude(run.stdout + run.stderr, ":pw@")
      }
    }))
})
