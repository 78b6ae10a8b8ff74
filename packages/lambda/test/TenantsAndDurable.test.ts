/**
 * Lambda's tenant isolation mode (the invocation's `tenantId` is the default scope, README.md#tenants)
 * and durable functions (a replay adopts the record its execution holds, README.md#durable-functions).
 *
 * The durable SDK is played by its contract, as `withDurableExecution` gives it to the handler: a
 * context that holds Lambda's (`lambdaContext`), says `durableExecutionMode: "ReplayMode"` when the
 * execution has checkpoints, runs a step once and returns its checkpoint on every replay, and
 * suspends the invocation at a `wait` that has not elapsed (a promise that never settles).
 */
import { IdempotencyError, IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { LambdaEvent, LambdaHttp, LambdaInvocation, LambdaTest } from "@effect-idempotency/lambda"
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import * as replay from "../src/internal/replay.js"

const Charge = Schema.Struct({ id: Schema.String, cents: Schema.Int })
const Charged = Schema.Struct({ chargeId: Schema.String })

/** The checkpoints of one durable execution, kept across its invocations as the service keeps them. */
class Execution {
  readonly checkpoints = new Map<string, unknown>()
  /** The handler's context for one invocation; replays once the execution has a checkpoint. */
  context(): LambdaInvocation.DurableContext & {
    readonly durableExecutionMode: "ExecutionMode" | "ReplayMode"
    readonly step: <A>(name: string, run: () => Promise<A>) => Promise<A>
    readonly wait: (name: string) => Promise<void>
  } {
    const checkpoints = this.checkpoints
    return {
      lambdaContext: LambdaTest.context({ remaining: "5 seconds" }),
      durableExecutionMode: checkpoints.size > 0 ? "ReplayMode" : "ExecutionMode",
      step: async <A>(name: string, run: () => Promise<A>) => {
        if (checkpoints.has(name)) return checkpoints.get(name) as A
        const value = await run()
        checkpoints.set(name, value)
        return value
      },
      wait: (name) => {
        if (checkpoints.has(name)) return Promise.resolve()
        checkpoints.set(name, true)
        return new Promise<void>(() => {})
      }
    }
  }
}

type Sdk = ReturnType<Execution["context"]>

/** A durable charge: a step that charges, a wait that suspends the first invocation, then the answer. */
const durableCharge = (name: string) => {
  let charges = 0
  const handler = LambdaEvent.idempotent({
    name,
    layer: IdempotencyStore.layerMemoryWith({ warn: false }),
    event: Charge,
    key: (charge) => charge.id,
    success: Charged,
    handler: (charge) =>
      Effect.gen(function*() {
        const sdk = (yield* LambdaInvocation.Invocation).durable as Sdk
        const chargeId = yield* Effect.promise(() =>
          sdk.step("charge", () => Promise.resolve(`ch-${charge.id}-${++charges}`))
        )
        yield* Effect.promise(() => sdk.wait("settle"))
        return { chargeId }
      })
  })
  return { handler, charges: () => charges }
}

/** The first invocation, which the SDK suspends: its promise never settles, and no one waits on it. */
const suspended = (promise: Promise<unknown>) =>
  Effect.sync(() => {
    promise.catch(() => undefined)
  })

describe("the invocation's tenant", () => {
  it.live("is the default scope: a key is one record per tenant, LambdaEvent and LambdaHttp alike", () =>
    Effect.gen(function*() {
      let runs = 0
      const handler = LambdaEvent.idempotent({
        name: `tenants-${randomUUID()}`,
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        event: Charge,
        key: (charge) => charge.id,
        success: Charged,
        handler: (charge) => Effect.sync(() => ({ chargeId: `${charge.id}-${++runs}` }))
      })
      const invoke = (tenantId: string | undefined) =>
        LambdaTest.invoke(handler, { id: "c-1", cents: 100 }, { tenantId })
      assert.deepStrictEqual(yield* invoke("acme"), { chargeId: "c-1-1" })
      assert.deepStrictEqual(yield* invoke("acme"), { chargeId: "c-1-1" })
      assert.deepStrictEqual(yield* invoke("globex"), { chargeId: "c-1-2" })
      assert.deepStrictEqual(yield* invoke(undefined), { chargeId: "c-1-3" })
      yield* Effect.promise(() => handler.dispose())

      let httpRuns = 0
      const http = LambdaHttp.idempotent({
        name: `tenants-http-${randomUUID()}`,
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        handler: () => Effect.sync(() => Response.json({ run: ++httpRuns }, { status: 201 }))
      })
      const post = (tenantId: string) =>
        Effect.map(
          LambdaTest.invoke(
            http,
            LambdaTest.httpApiEvent({
              method: "POST",
              path: "/charges",
              headers: { "idempotency-key": "k-1" },
              body: "{}"
            }),
            { tenantId }
          ),
          (result) => (result as { readonly body: string }).body
        )
      assert.strictEqual(yield* post("acme"), "{\"run\":1}")
      assert.strictEqual(yield* post("globex"), "{\"run\":2}")
      assert.strictEqual(yield* post("acme"), "{\"run\":1}")
      yield* Effect.promise(() => http.dispose())
    }))

  it.live("a scope of the function's own replaces it", () =>
    Effect.gen(function*() {
      let runs = 0
      const handler = LambdaEvent.idempotent({
        name: `own-scope-${randomUUID()}`,
        layer: IdempotencyStore.layerMemoryWith({ warn: false }),
        event: Charge,
        key: (charge) => charge.id,
        scope: () => "merchant-7",
        success: Charged,
        handler: (charge) => Effect.sync(() => ({ chargeId: `${charge.id}-${++runs}` }))
      })
      assert.deepStrictEqual(yield* LambdaTest.invoke(handler, { id: "c-1", cents: 1 }, { tenantId: "acme" }), {
        chargeId: "c-1-1"
      })
      assert.deepStrictEqual(yield* LambdaTest.invoke(handler, { id: "c-1", cents: 1 }, { tenantId: "globex" }), {
        chargeId: "c-1-1"
      })
      yield* Effect.promise(() => handler.dispose())
    }))
})

describe("a durable function", () => {
  it.live("a replay is not a conflict: it adopts its execution's record, and its steps ran once", () =>
    Effect.gen(function*() {
      const { charges, handler } = durableCharge(`durable-${randomUUID()}`)
      const execution = new Execution()
      const event = { id: "c-1", cents: 100 }
      // the first invocation reserves, charges, and is suspended at the wait
      yield* suspended(handler(event, execution.context()))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      assert.strictEqual(charges(), 1)
      const replay = execution.context()
      assert.strictEqual(replay.durableExecutionMode, "ReplayMode")
      const answer = yield* Effect.promise(() => handler(event, replay))
      assert.deepStrictEqual(answer, { chargeId: "ch-c-1-1" })
      assert.strictEqual(charges(), 1)
      // the replay recorded the outcome: another execution with the same event gets it
      const other = yield* Effect.promise(() => handler(event, new Execution().context()))
      assert.deepStrictEqual(other, { chargeId: "ch-c-1-1" })
      assert.strictEqual(charges(), 1)
      yield* Effect.promise(() => handler.dispose())
    }))

  it.live("the same invocation outside replay mode is a conflict (what the replay would meet)", () =>
    Effect.gen(function*() {
      const { handler } = durableCharge(`durable-${randomUUID()}`)
      const execution = new Execution()
      const event = { id: "c-1", cents: 100 }
      yield* suspended(handler(event, execution.context()))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      const notReplaying = { ...execution.context(), durableExecutionMode: "ExecutionMode" as const }
      const error = yield* Effect.flip(Effect.tryPromise(() => handler(event, notReplaying)))
      assert.instanceOf(error.error, IdempotencyError.IdempotencyConflict)
      yield* Effect.promise(() => handler.dispose())
    }))

  it.live("a replay with another payload under the key adopts nothing: KeyReused", () =>
    Effect.gen(function*() {
      const { handler } = durableCharge(`durable-${randomUUID()}`)
      const execution = new Execution()
      yield* suspended(handler({ id: "c-1", cents: 100 }, execution.context()))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      const error = yield* Effect.flip(
        Effect.tryPromise(() => handler({ id: "c-1", cents: 999 }, execution.context()))
      )
      assert.instanceOf(error.error, IdempotencyError.KeyReused)
      yield* Effect.promise(() => handler.dispose())
    }))

  it("a durable context is told from Lambda's, and its mode from the SDK's field", () => {
    const lambda = LambdaTest.context({ remaining: "1 second" })
    assert.isFalse(LambdaInvocation.isDurableContext(lambda))
    assert.isFalse(LambdaInvocation.isReplay(lambda))
    assert.isTrue(LambdaInvocation.isDurableContext({ lambdaContext: lambda }))
    assert.isFalse(LambdaInvocation.isReplay({ lambdaContext: lambda }))
    assert.isTrue(LambdaInvocation.isReplay({ lambdaContext: lambda, durableExecutionMode: "ReplayMode" } as never))
  })
})

describe("the replay's store", () => {
  const id = IdempotencyRecord.makeRecordId({ operation: "settle", key: IdempotencyKey.unsafeMake("k-1") })
  const request = (token: string) => ({
    id,
    token,
    fingerprint: "f",
    lease: Duration.seconds(5),
    ttl: Duration.minutes(1),
    takeover: true
  })

  it.effect("writes under the adopted token, and shows the record as the replay's own", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ warn: false })
      assert.strictEqual((yield* store.reserve(request("earlier")))._tag, "Reserved")
      const adopting = replay.adopting(store)
      const reserved = yield* adopting.reserve(request("replay"))
      assert.strictEqual(reserved._tag, "Reserved")
      yield* adopting.complete({
        id,
        token: "replay",
        outcome: IdempotencyRecord.StoredOutcome.Success({ value: "{}" }),
        ttl: Duration.minutes(1)
      })
      const record = Option.getOrThrow(yield* store.get(id))
      assert.deepStrictEqual([record.status, record.token, record.attempt], ["COMPLETED", "earlier", 1])
      assert.strictEqual(Option.getOrThrow(yield* adopting.get(id)).token, "replay")
    }))

  it.effect("a record taken over between the read and the extension is not adopted: it is a conflict", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.makeMemory({ warn: false })
      yield* store.reserve(request("earlier"))
      const stale = Option.getOrThrow(yield* store.get(id))
      // another attempt holds the record now; the replay's read still shows the earlier one
      yield* store.release({ id, token: "earlier" })
      yield* store.reserve(request("other"))
      let reads = 0
      const racing: typeof store = {
        ...store,
        reserve: (r) =>
          reads++ === 0
            ? Effect.succeed(IdempotencyRecord.ReserveResult.Existing({ record: stale, now: 0 }))
            : store.reserve(r)
      }
      const answer = yield* replay.adopting(racing).reserve(request("replay"))
      assert.strictEqual(answer._tag, "Existing")
      assert.strictEqual(answer._tag === "Existing" && answer.record.token, "other")
      assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, "other")
    }))
})
