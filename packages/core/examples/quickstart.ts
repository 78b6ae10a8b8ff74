/**
 * The README's quick start: an idempotent charge on the memory store.
 *
 * Run it with `npx tsx --conditions=source packages/core/examples/quickstart.ts`.
 */
import { Idempotency, IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { Effect, Schema } from "effect"
import { fileURLToPath } from "node:url"

// The request, the result, and the domain failure worth replaying, as Schemas.
const Charge = Schema.Struct({ customerId: Schema.String, amountCents: Schema.Int })
const Receipt = Schema.Struct({ chargeId: Schema.String, amountCents: Schema.Int })
class PaymentDeclined extends Schema.TaggedError<PaymentDeclined>()("PaymentDeclined", { reason: Schema.String }) {}

// The downstream call that must not happen twice. It forwards a stable per-step key.
const callPaymentsApi = (charge: typeof Charge.Type) =>
  Effect.gen(function*() {
    const key = yield* IdempotencyContext.stepKey("payments")
    yield* Effect.log(`POST /charges (Idempotency-Key: ${key})`)
    return { chargeId: `ch_${charge.customerId}_${charge.amountCents}`, amountCents: charge.amountCents }
  })

export const chargeCustomer = Idempotency.make({
  name: "charge-customer",
  payload: Charge,
  success: Receipt,
  failure: PaymentDeclined, // declines are recorded and replayed; other failures release the key
  timeout: "8 seconds", // the downstream's deadline; the lease outlasts it
  ttl: "24 hours", // how long retries get the recorded outcome
  execute: callPaymentsApi
})

export const program = Effect.gen(function*() {
  const request = {
    key: "5f1c7e2a-9d1b-4f63-8a0e-2b7c4d9e1f30", // the client's Idempotency-Key
    payload: { customerId: "cus_42", amountCents: 1999 }
  }
  const first = yield* chargeCustomer.runDetailed(request)
  const retry = yield* chargeCustomer.runDetailed(request) // the platform retried: no second charge
  yield* Effect.log(`first: replayed=${first.replayed}; retry: replayed=${retry.replayed}, ${retry.value.chargeId}`)
  return { first, retry }
}).pipe(Effect.provide(IdempotencyStore.layerMemory))

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  Effect.runPromise(program)
}
