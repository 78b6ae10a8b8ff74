import { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { FaultyStore } from "@effect-idempotency/testing"
import { IdempotentActivity } from "@effect-idempotency/workflow"
import { assert, describe, it } from "@effect/vitest"
import * as Activity from "@effect/workflow/Activity"
import * as Workflow from "@effect/workflow/Workflow"
import * as WorkflowEngine from "@effect/workflow/WorkflowEngine"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

class CardDeclined extends Schema.TaggedError<CardDeclined>()("CardDeclined", { reason: Schema.String }) {}

const Receipt = Schema.Struct({ chargeId: Schema.String, key: Schema.String })

const Checkout = Workflow.make({
  name: "Checkout",
  payload: { orderId: Schema.String, amountCents: Schema.Int },
  success: Receipt,
  error: Schema.Union(CardDeclined, IdempotentActivity.IdempotencyErrors),
  idempotencyKey: ({ orderId }) => orderId
})

/**
 * The side effect: each call is counted, and appends a charge (its id numbered by the call) and answers with it and
 * the idempotency key the activity forwards; amounts over 100,000 are declined.
 */
const makeBank = Effect.gen(function*() {
  const charges = yield* Ref.make<ReadonlyArray<number>>([])
  const calls = yield* Ref.make(0)
  const charge = (amountCents: number, gate?: Effect.Effect<void>) =>
    Effect.gen(function*() {
      yield* Ref.update(calls, (n) => n + 1)
      const { key } = yield* IdempotencyContext.IdempotencyContext
      if (gate !== undefined) yield* gate
      if (amountCents > 100_000) return yield* new CardDeclined({ reason: "limit" })
      const n = yield* Ref.modify(charges, (all) => [all.length + 1, [...all, amountCents]])
      return { chargeId: `ch_${n}`, key }
    })
  return { calls, charges, charge }
})

type Bank = Effect.Effect.Success<typeof makeBank>

/** The workflow, its activity charging through `bank` (after `gate`, when given). */
const checkoutLayer = (
  bank: Bank,
  options?: {
    readonly gate?: Effect.Effect<void>
    readonly twice?: boolean
    readonly conflictWait?: Duration.DurationInput
  }
) =>
  Checkout.toLayer(({ amountCents, orderId }) => {
    const charge = IdempotentActivity.make({
      name: "charge",
      success: Receipt,
      error: CardDeclined,
      payload: { orderId, amountCents },
      conflictWait: options?.conflictWait,
      execute: bank.charge(amountCents, options?.gate)
    })
    return options?.twice === true ? Effect.zipRight(charge, charge) : charge
  })

/**
 * One process's engine: its own in-memory workflow engine (what a restarted process has: nothing),
 * sharing the store given.
 */
const engine = (store: Layer.Layer<IdempotencyStore.IdempotencyStore>, workflow: Layer.Layer<never, never, any>) =>
  workflow.pipe(Layer.provideMerge(WorkflowEngine.layerMemory), Layer.provideMerge(store))

const execute = (payload: { readonly orderId: string; readonly amountCents: number }) => Checkout.execute(payload)

describe("IdempotentActivity", () => {
  it.scoped("a workflow executed again in a fresh engine replays the activity: one charge, the same receipt", () =>
    Effect.gen(function*() {
      const bank = yield* makeBank
      const store = yield* Layer.memoize(IdempotencyStore.layerMemory)
      const first = yield* execute({ orderId: "o-1", amountCents: 1999 }).pipe(
        Effect.provide(engine(store, checkoutLayer(bank)))
      )
      const second = yield* execute({ orderId: "o-1", amountCents: 1999 }).pipe(
        Effect.provide(engine(store, checkoutLayer(bank)))
      )
      assert.deepStrictEqual(second, first)
      assert.strictEqual(yield* Ref.get(bank.calls), 1)
      assert.deepStrictEqual(yield* Ref.get(bank.charges), [1999])
      // the key forwarded downstream is the one `Activity.idempotencyKey` gives for the execution
      const executionId = yield* Checkout.executionId({ orderId: "o-1", amountCents: 1999 })
      const expected = yield* Activity.idempotencyKey("charge").pipe(
        Effect.provideService(
          WorkflowEngine.WorkflowInstance,
          WorkflowEngine.WorkflowInstance.initial(Checkout, executionId)
        )
      )
      assert.strictEqual(first.key, expected)
    }))

  it.scoped("a recorded domain failure is replayed with the activity's error schema, without charging", () =>
    Effect.gen(function*() {
      const bank = yield* makeBank
      const store = yield* Layer.memoize(IdempotencyStore.layerMemory)
      // each run in an engine of its own, as a restarted process would
      const run = Effect.flip(
        execute({ orderId: "o-2", amountCents: 500_000 }).pipe(
          Effect.provide(engine(store, checkoutLayer(bank)))
        )
      )
      const first = yield* run
      const second = yield* run
      assert.instanceOf(first, CardDeclined)
      assert.instanceOf(second, CardDeclined)
      assert.deepStrictEqual(second, first)
      assert.strictEqual(yield* Ref.get(bank.calls), 1)
      assert.deepStrictEqual(yield* Ref.get(bank.charges), [])
    }))

  it.scoped("the same execution with another payload fails with KeyReused and charges nothing more", () =>
    Effect.gen(function*() {
      const bank = yield* makeBank
      const store = yield* Layer.memoize(IdempotencyStore.layerMemory)
      yield* execute({ orderId: "o-3", amountCents: 1999 }).pipe(Effect.provide(engine(store, checkoutLayer(bank))))
      const error = yield* Effect.flip(
        execute({ orderId: "o-3", amountCents: 2999 }).pipe(Effect.provide(engine(store, checkoutLayer(bank))))
      )
      assert.strictEqual(error._tag, "KeyReused")
      assert.strictEqual(yield* Ref.get(bank.calls), 1)
      assert.deepStrictEqual(yield* Ref.get(bank.charges), [1999])
    }))

  it.scoped("one named activity run twice in a workflow answers the first run's outcome", () =>
    Effect.gen(function*() {
      const bank = yield* makeBank
      const store = yield* Layer.memoize(IdempotencyStore.layerMemory)
      const receipt = yield* execute({ orderId: "o-4", amountCents: 1999 }).pipe(
        Effect.provide(engine(store, checkoutLayer(bank, { twice: true })))
      )
      assert.strictEqual(receipt.chargeId, "ch_1")
      assert.strictEqual(yield* Ref.get(bank.calls), 1)
      assert.deepStrictEqual(yield* Ref.get(bank.charges), [1999])
    }))

  it.scopedLive(
    "an execution that meets the key held by another engine waits, then replays its outcome",
    () =>
      Effect.gen(function*() {
        const bank = yield* makeBank
        const store = yield* Layer.memoize(IdempotencyStore.layerMemory)
        const entered = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const gate = Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(release))
        const payload = { orderId: "o-5", amountCents: 1999 }
        const holder = yield* execute(payload).pipe(
          Effect.provide(engine(store, checkoutLayer(bank, { gate }))),
          Effect.fork
        )
        yield* Deferred.await(entered)
        // a second process, its own engine, the same execution: the key is held, so it waits
        const waiter = yield* execute(payload).pipe(Effect.provide(engine(store, checkoutLayer(bank))), Effect.fork)
        yield* Effect.sleep("300 millis")
        assert.isNull(yield* Fiber.poll(waiter).pipe(Effect.map((o) => o._tag === "Some" ? o.value : null)))
        yield* Deferred.succeed(release, undefined)
        const first = yield* Fiber.join(holder)
        const second = yield* Fiber.join(waiter)
        assert.deepStrictEqual(second, first)
        assert.strictEqual(yield* Ref.get(bank.calls), 1)
        assert.deepStrictEqual(yield* Ref.get(bank.charges), [1999])
      }),
    { timeout: 20_000 }
  )

  it.scopedLive(
    "a holder that keeps the key past conflictWait: the waiting run fails with IdempotencyConflict",
    () =>
      Effect.gen(function*() {
        const bank = yield* makeBank
        const store = yield* Layer.memoize(IdempotencyStore.layerMemory)
        const entered = yield* Deferred.make<void>()
        const gate = Effect.zipRight(Deferred.succeed(entered, undefined), Effect.never)
        const payload = { orderId: "o-7", amountCents: 1999 }
        yield* execute(payload).pipe(Effect.provide(engine(store, checkoutLayer(bank, { gate }))), Effect.forkScoped)
        yield* Deferred.await(entered)
        const error = yield* Effect.flip(
          execute(payload).pipe(Effect.provide(engine(store, checkoutLayer(bank, { conflictWait: "300 millis" }))))
        )
        assert.strictEqual(error._tag, "IdempotencyConflict")
        assert.strictEqual(yield* Ref.get(bank.calls), 1)
      }),
    { timeout: 20_000 }
  )

  it.scoped("the store unreachable: the activity fails with StoreUnavailable and the side effect never runs", () =>
    Effect.gen(function*() {
      const bank = yield* makeBank
      const down = FaultyStore.layer(IdempotencyStore.layerMemory)
      const error = yield* Effect.flip(
        execute({ orderId: "o-6", amountCents: 1999 }).pipe(
          FaultyStore.withFaults([FaultyStore.unavailable("reserve")]),
          Effect.provide(engine(down, checkoutLayer(bank)))
        )
      )
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.strictEqual(yield* Ref.get(bank.calls), 0)
    }))
})
