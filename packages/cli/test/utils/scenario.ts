/**
 * The operator's scenario, played on one store through the CLI process: a key left stuck in
 * progress by an attempt that died (reserved, never completed, its lease ended) is found by
 * `list --state stuck`, shown by `inspect` without its token, refused by `unblock` fenced on the
 * wrong attempt and unblocked on the right one, after which a retry through the library executes
 * once and the next replays.
 *
 * Then the same with a process that really dies: a child (`stuckChild.ts`) runs the operation
 * through the library on the same store, its downstream never ends, and it is killed (SIGKILL) once
 * its record is IN_PROGRESS. Its heartbeat stops with it; once its short lease is over, `list`
 * finds the record stuck and `unblock` releases it at the attempt `list` showed.
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
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { fileURLToPath } from "node:url"
import { cli, Code, parsed, script } from "./cli.js"

const STUCK_CHILD = fileURLToPath(new URL("./stuckChild.ts", import.meta.url))

/**
 * The lease of the child's attempt, kept alive by its heartbeat (every quarter of it) until the
 * child is killed: long enough that a heartbeat delayed by a busy machine does not let it end (a
 * lease of 1 s did end, with two busy loops beside the tests on two cores).
 */
const CHILD_LEASE_MILLIS = 5000

/** The operation the tests run through the library, counting its executions. */
const retryOf = (operation: string, key: string) => {
  let executions = 0
  const retry = Effect.sync(() => ++executions).pipe(
    Idempotency.once({ operation, key, payload: { amount: 1 }, success: Schema.Number })
  )
  return { retry, executions: () => executions }
}

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
    /** What `migrate --json` says it did; `refused` where the CLI cannot migrate the store (an admin endpoint). */
    readonly migrated: { readonly applied: boolean } | "refused"
    /**
     * Whether a child process (`stuckChild.ts`, on the store the CLI's arguments name) can run the
     * operation for the test to kill. Default `true`; `false` where only the CLI reaches the store
     * (through an admin endpoint).
     */
    readonly killedProcess?: boolean | undefined
  }
) =>
  layer(options.layer, { timeout: Duration.seconds(120), excludeTestServices: true })(name, (it) => {
    const run = (...args: ReadonlyArray<string>) =>
      Effect.flatMap(CliStore, (store) => cli([...args, ...store.args], { env: store.env }))

    it.effect("migrate, find a stuck key, inspect it, unblock it fenced on its attempt, and retry once", () =>
      Effect.gen(function*() {
        const migrated = yield* run("migrate", "--json")
        if (options.migrated === "refused") {
          assert.strictEqual(migrated.code, Code.Usage, migrated.stderr)
          assert.strictEqual(parsed(migrated).error._tag, "InvalidStore")
        } else {
          assert.strictEqual(migrated.code, Code.Ok, migrated.stderr)
          assert.strictEqual(parsed(migrated).applied, options.migrated.applied)
        }

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

        const { executions, retry } = retryOf(operation, key)
        assert.strictEqual(yield* retry, 1)
        assert.strictEqual(yield* retry, 1)
        assert.strictEqual(executions(), 1)

        const stats = yield* run("stats", "--json")
        assert.strictEqual(stats.code, Code.Ok, stats.stderr)
        assert.deepInclude(parsed(stats).counts, { operation, state: "completed", count: 1 })

        const purge = yield* run("purge", "--limit", "100", "--json")
        assert.strictEqual(purge.code, Code.Ok, purge.stderr)
        assert.isNumber(parsed(purge).purged)
      }), 60_000)

    // registered only where a child process can reach the store (see `killedProcess`)
    if (options.killedProcess !== false) {
      it.scoped("a record left in progress by a killed process is listed as stuck, unblocked, and retried once", () =>
        Effect.gen(function*() {
          const target = yield* CliStore
          const store = yield* IdempotencyStore.IdempotencyStore
          const operation = `cli-killed-${randomUUID().slice(0, 8)}`
          const key = IdempotencyKey.unsafeMake(`order-${randomUUID()}`)
          const id = IdempotencyRecord.makeRecordId({ operation, key })

          const child = yield* script(STUCK_CHILD, [operation, key, String(CHILD_LEASE_MILLIS), ...target.args], {
            env: target.env
          })
          // the downstream runs and the record is IN_PROGRESS (bounded: 30 s for the process to start)
          let inProgress = false
          for (let i = 0; i < 1500 && !inProgress; i++) {
            if (child.stdout().includes("EXECUTING\n")) {
              const record = yield* store.get(id)
              inProgress = Option.isSome(record) && record.value.status === "IN_PROGRESS"
            }
            if (!inProgress) {
              yield* Effect.sleep("20 millis")
            }
          }
          assert.isTrue(inProgress, `the child never reserved the key: ${child.stderr()}`)
          // while the process lives, its heartbeat keeps the record running
          const running = yield* run("list", "--state", "running", "--operation", operation, "--json")
          assert.strictEqual(running.code, Code.Ok, running.stderr)
          assert.deepStrictEqual(
            parsed(running).records.map((r: any) =>
              r.key
            ),
            [key]
          )
          child.kill("SIGKILL")
          assert.deepStrictEqual(yield* child.exited, { code: null, signal: "SIGKILL" })

          // stuck once the lease the child kept alive is over (bounded: the lease, then 30 s)
          let records: ReadonlyArray<any> = []
          yield* Effect.sleep(`${CHILD_LEASE_MILLIS} millis`)
          const until = Date.now() + 30_000
          for (let i = 0; records.length === 0 && (i === 0 || Date.now() < until); i++) {
            if (i > 0) {
              yield* Effect.sleep("500 millis")
            }
            const list = yield* run("list", "--state", "stuck", "--operation", operation, "--json")
            assert.strictEqual(list.code, Code.Ok, list.stderr)
            records = parsed(list).records
          }
          assert.deepStrictEqual(
            records.map((r: any) => [r.operation, r.key, r.state, r.status, r.attempt]),
            [[operation, key, "stuck", "IN_PROGRESS", 1]]
          )

          const unblock = yield* run(
            "unblock",
            operation,
            key,
            "--reason",
            "killed",
            "--expect-attempt",
            String(records[0].attempt),
            "--json"
          )
          assert.strictEqual(unblock.code, Code.Ok, unblock.stderr)
          assert.deepInclude(parsed(unblock), { unblocked: true, attempt: records[0].attempt })

          const { executions, retry } = retryOf(operation, key)
          assert.strictEqual(yield* retry, 1)
          assert.strictEqual(yield* retry, 1)
          assert.strictEqual(executions(), 1)
          // the killed process's downstream ran once, and its outcome was never recorded
          assert.strictEqual(child.stdout().split("EXECUTING").length - 1, 1)
        }), 90_000)
    }

    it.effect("an invalid key is refused before the store is asked, its echo bounded", () =>
      Effect.gen(function*() {
        const key = `bad key ${"x".repeat(5000)}`
        const result = yield* run("inspect", "create-order", key, "--json")
        assert.strictEqual(result.code, Code.Usage)
        assert.strictEqual(parsed(result).error._tag, "InvalidIdempotencyKey")
        assert.isBelow(result.stdout.length + result.stderr.length, 1000)
      }))
  })
