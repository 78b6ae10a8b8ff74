/**
 * The operator's scenario, played on one store through the CLI process: a key left stuck in
 * progress by an attempt that died (reserved, never completed, its lease ended) is found by
 * `list --state stuck`, shown by `inspect` without its token, refused by `unblock` fenced on the
 * wrong attempt and unblocked on the right one, after which a retry through the library executes
 * once and the next replays.
 *
 * The layer is built without test services: the records age on the real clock, as the CLI sees them.
 */
import { Idempotency, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { StoreFixtures } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { cli, Code, parsed } from "./cli.js"

/** How the CLI reaches the store of the test: the arguments that name it, and its environment. */
export class CliStore extends Context.Tag("test/CliStore")<CliStore, {
  readonly args: ReadonlyArray<string>
  readonly env?: Record<string, string> | undefined
}>() {}

export const scenario = (
  name: string,
  options: {
    /** The store in the test process, and how the CLI reaches the same records. */
    readonly layer: Layer.Layer<IdempotencyStore.IdempotencyStore | CliStore, unknown>
    /** What `migrate --json` says it did. */
    readonly migrated: { readonly applied: boolean }
  }
) =>
  layer(options.layer, { timeout: Duration.seconds(120), excludeTestServices: true })(name, (it) => {
    const run = (...args: ReadonlyArray<string>) =>
      Effect.flatMap(CliStore, (store) => cli([...args, ...store.args], { env: store.env }))

    it.effect("migrate, find a stuck key, inspect it, unblock it fenced on its attempt, and retry once", () =>
      Effect.gen(function*() {
        const migrated = yield* run("migrate", "--json")
        assert.strictEqual(migrated.code, Code.Ok, migrated.stderr)
        assert.strictEqual(parsed(migrated).applied, options.migrated.applied)

        // what an attempt killed mid-flight leaves: a reservation never completed, its lease over
        const operation = `cli-${randomUUID().slice(0, 8)}`
        const key = IdempotencyKey.unsafeMake(`order-${randomUUID()}`)
        const id = IdempotencyRecord.makeRecordId({ operation, key })
        const token = `token-${randomUUID()}`
        const store = yield* IdempotencyStore.IdempotencyStore
        StoreFixtures.expectReserved(
          yield* store.reserve(StoreFixtures.reserveRequest(id, { token, lease: Duration.millis(100) }))
        )
        yield* Effect.sleep("300 millis")

        const list = yield* run("list", "--state", "stuck", "--operation", operation, "--json")
        assert.strictEqual(list.code, Code.Ok, list.stderr)
        const listed = parsed(list)
        assert.deepStrictEqual(
          listed.records.map((r: any) => [r.operation, r.key, r.state, r.attempt]),
          [[operation, key, "stuck", 1]]
        )
        assert.notInclude(list.stdout, token)

        const inspect = yield* run("inspect", operation, key, "--json")
        assert.strictEqual(inspect.code, Code.Ok, inspect.stderr)
        const { record } = parsed(inspect)
        assert.strictEqual(record.state, "stuck")
        assert.strictEqual(record.status, "IN_PROGRESS")
        assert.strictEqual(record.attempt, 1)
        assert.notProperty(record, "token")
        assert.notInclude(inspect.stdout, token)
        // for a person: a table, and the command that makes the key run again
        const shown = yield* run("inspect", operation, key)
        assert.strictEqual(shown.code, Code.Ok, shown.stderr)
        assert.match(shown.stdout, /state\s+stuck/)
        assert.include(shown.stdout, `unblock ${operation} ${key} --expect-attempt 1`)
        assert.notInclude(shown.stdout, token)

        const wrong = yield* run("unblock", operation, key, "--reason", "INC-1", "--expect-attempt", "2", "--json")
        assert.strictEqual(wrong.code, Code.Refused, wrong.stderr)
        assert.deepInclude(parsed(wrong).error, { _tag: "UnblockRefused", reason: "changed", attempt: 1 })

        const right = yield* run("unblock", operation, key, "--reason", "INC-1", "--expect-attempt", "1", "--json")
        assert.strictEqual(right.code, Code.Ok, right.stderr)
        assert.deepInclude(parsed(right), { unblocked: true, attempt: 1, keyHash: IdempotencyKey.hash(key) })
        // the audit line is a log on stderr, with the key's hash, never the key or the token
        assert.include(right.stderr, IdempotencyKey.hash(key))
        assert.notInclude(right.stderr, token)

        const gone = yield* run("inspect", operation, key, "--json")
        assert.strictEqual(gone.code, Code.NotFound, gone.stderr)
        assert.strictEqual(parsed(gone).error._tag, "RecordNotFound")

        let executions = 0
        const retry = Effect.sync(() =>
          ++executions
        ).pipe(
          Idempotency.once({ operation, key, payload: { amount: 1 }, success: Schema.Number })
        )
        assert.strictEqual(yield* retry, 1)
        assert.strictEqual(yield* retry, 1)
        assert.strictEqual(executions, 1)

        const stats = yield* run("stats", "--json")
        assert.strictEqual(stats.code, Code.Ok, stats.stderr)
        assert.deepInclude(parsed(stats).counts, { operation, state: "completed", count: 1 })

        const purge = yield* run("purge", "--limit", "100", "--json")
        assert.strictEqual(purge.code, Code.Ok, purge.stderr)
        assert.isNumber(parsed(purge).purged)
      }), 60_000)

    it.effect("an invalid key is refused before the store is asked, its echo bounded", () =>
      Effect.gen(function*() {
        const key = `bad key ${"x".repeat(5000)}`
        const result = yield* run("inspect", "create-order", key, "--json")
        assert.strictEqual(result.code, Code.Usage)
        assert.strictEqual(parsed(result).error._tag, "InvalidIdempotencyKey")
        assert.isBelow(result.stdout.length + result.stderr.length, 1000)
      }))
  })
