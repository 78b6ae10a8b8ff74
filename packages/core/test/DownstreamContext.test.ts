/**
 * The downstream's `IdempotencyContext` is its own: it holds the attempt's record, token and number
 * while the downstream runs, in the downstream's fiber and every fiber it forks, and none of it
 * reaches the caller, however the downstream ends. What the downstream does to its other fiber
 * references still reaches the caller (RuntimeBehaviour.test.ts, section 6).
 */
import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as TestClock from "effect/TestClock"

class Boom extends Schema.TaggedError<Boom>()("Boom", {}) {}

class Tenant extends Context.Tag("test/Tenant")<Tenant, string>() {}

/** What the downstream saw of its context, per run. */
interface Seen {
  readonly key: string
  readonly attempt: number
  readonly token: string
  readonly inChild: string | undefined
  readonly tenant: string
}

const ends = ["succeeds", "fails", "dies", "times out"] as const
type End = typeof ends[number]

const operationFor = (end: End, seen: Array<Seen>) =>
  Idempotency.make({
    name: `context-${end}`,
    payload: Schema.Null,
    success: Schema.String,
    failure: Boom,
    // a failure is released, so that a retry runs as an attempt of its own
    onFailure: () => "release",
    timeout: "1 second",
    onTimeout: "release",
    execute: () =>
      Effect.gen(function*() {
        const context = yield* IdempotencyContext.IdempotencyContext
        // a fiber the downstream forks sees the same context
        const inChild = yield* Effect.fork(Effect.serviceOption(IdempotencyContext.IdempotencyContext)).pipe(
          Effect.flatMap(Fiber.join),
          Effect.map(Option.map((child) => child.token)),
          Effect.map(Option.getOrUndefined)
        )
        seen.push({
          key: context.key,
          attempt: context.attempt,
          token: context.token,
          inChild,
          tenant: yield* Tenant
        })
        switch (end) {
          case "succeeds":
            return "done"
          case "fails":
            return yield* Effect.fail(new Boom())
          case "dies":
            return yield* Effect.die("the downstream died")
          case "times out":
            return yield* Effect.never
        }
      })
  })

describe("the downstream's IdempotencyContext", () => {
  it.effect("is seen by the downstream and its forks, and never by the caller, however the downstream ends", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ warn: false })
      for (const end of ends) {
        const seen: Array<Seen> = []
        const operation = operationFor(end, seen)
        const key = `key-${end.replace(" ", "-")}`
        const run = Effect.gen(function*() {
          const before = yield* Effect.serviceOption(IdempotencyContext.IdempotencyContext)
          const fiber = yield* Effect.fork(Effect.exit(operation.run({ key, payload: null })))
          if (end === "times out") {
            // the clock moves past the timeout once the downstream runs (a bounded wait for its start)
            for (let i = 0; i < 1000 && seen.length === 0; i++) yield* Effect.yieldNow()
            yield* TestClock.adjust("2 seconds")
          }
          const exit = yield* Fiber.join(fiber)
          const after = yield* Effect.serviceOption(IdempotencyContext.IdempotencyContext)
          const tenant = yield* Tenant
          return { before, exit, after, tenant }
        })
        const { after, before, exit, tenant } = yield* run.pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, store),
          Effect.provideService(Tenant, "acme")
        )
        assert.isTrue(Option.isNone(before), `${end}: the caller had no context before the run`)
        assert.isTrue(Option.isNone(after), `${end}: the caller has no context after the run`)
        assert.strictEqual(tenant, "acme", `${end}: the caller's own services are intact`)
        assert.strictEqual(seen.length, 1, `${end}: the downstream ran once`)
        const [first] = seen
        assert.strictEqual(first!.key, key, `${end}: the downstream saw its key`)
        assert.strictEqual(first!.attempt, 1, `${end}: the downstream saw its attempt`)
        assert.isTrue(first!.token.length > 0, `${end}: the downstream saw its token`)
        assert.strictEqual(first!.inChild, first!.token, `${end}: a fork of the downstream saw the same context`)
        assert.strictEqual(first!.tenant, "acme", `${end}: the downstream saw the caller's services`)
        assert.strictEqual(Exit.isSuccess(exit), end === "succeeds", `${end}: the run's exit`)
      }
    }))

  it.effect("is the second attempt's own when a released record runs again", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ warn: false })
      const seen: Array<Seen> = []
      const operation = operationFor("fails", seen)
      const provide = <A, E>(effect: Effect.Effect<A, E, IdempotencyStore.IdempotencyStore | Tenant>) =>
        effect.pipe(
          Effect.provideService(IdempotencyStore.IdempotencyStore, store),
          Effect.provideService(Tenant, "acme")
        )
      yield* provide(Effect.exit(operation.run({ key: "again", payload: null })))
      yield* provide(Effect.exit(operation.run({ key: "again", payload: null })))
      assert.strictEqual(seen.length, 2, "both attempts ran")
      assert.notStrictEqual(seen[0]!.token, seen[1]!.token, "each attempt saw its own token")
      assert.strictEqual(seen[1]!.inChild, seen[1]!.token, "the second attempt's fork saw the second token")
    }))
})
