/**
 * The README's quick start: a charge that a retry never makes twice, on the memory store.
 */
import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { Effect, Schema } from "effect"

const Receipt = Schema.Struct({ chargeId: Schema.String, amountCents: Schema.Int })

// the call that must not happen twice; it forwards a stable key to the payments API
const charge = (amountCents: number) =>
  Effect.gen(function*() {
    const key = yield* IdempotencyContext.stepKey("payments")
    yield* Effect.log(`POST /charges (Idempotency-Key: ${key})`)
    return { chargeId: `ch_${key.slice(0, 8)}`, amountCents }
  })

export const program = Effect.gen(function*() {
  const once = Idempotency.once({
    operation: "charge",
    key: "5f1c7e2a-9d1b",
    payload: { cents: 1999 },
    success: Receipt
  })
  const first = yield* Idempotency.result(charge(1999).pipe(once))
  const retry = yield* Idempotency.result(charge(1999).pipe(once)) // the platform retried: no second charge
  yield* Effect.log(`first: replayed=${first.replayed}; retry: replayed=${retry.replayed}`)
  return { first, retry }
}).pipe(Effect.provide(IdempotencyStore.layerMemory))
