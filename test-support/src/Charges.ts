/**
 * The application the adapters' retry properties run: a charge sent to a payments API over the
 * simulated downstream (which does not deduplicate by key), the policies of a deployed handler, and
 * the known-bad case each adapter must be caught on (a defect released: the write is repeated).
 *
 * @example
 * const report = yield* RetryProperty.run({ ...property, ...Charges.defectsOnly, operation }, Charges.bad)
 * Charges.repeats(report)
 */
import type { IdempotencyPolicy } from "@effect-idempotency/core"
import type { RetryProperty } from "@effect-idempotency/testing"
import { SimulatedDownstream } from "@effect-idempotency/testing"
import { assert } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

export const Charge = Schema.Struct({ chargeId: Schema.String, cents: Schema.Int })

export const Charged = Schema.Struct({ receipt: Schema.Number })

/** The payments API could not be reached, or failed: nothing was charged, or a retry may charge twice. */
export class ChargeFailed extends Schema.TaggedError<ChargeFailed>()("ChargeFailed", {}) {}

/** The application's payments API. */
export class Payments extends Context.Tag("test/Payments")<Payments, {
  readonly charge: (charge: typeof Charge.Type) => Effect.Effect<{ readonly receipt: number }, ChargeFailed>
}>() {}

/** The payments API over the simulated downstream (no deduplication by key). */
export const PaymentsSimulated: Layer.Layer<Payments, never, SimulatedDownstream.SimulatedDownstream> = Layer.effect(
  Payments,
  Effect.map(SimulatedDownstream.SimulatedDownstream, (downstream) => ({
    charge: (charge) =>
      downstream.call({ endpoint: "POST /charges", body: charge }).pipe(
        Effect.map((receipt) => ({ receipt: receipt.writeId })),
        Effect.mapError(() => new ChargeFailed())
      )
  }))
)

/** The payments API of a deployed layer, which the property replaces with its own. */
export const PaymentsUnused: Layer.Layer<Payments> = Layer.succeed(Payments, { charge: () => Effect.die("unused") })

/** The policies of a deployed handler: a 2-second limit, the outcome unknown past it. */
export const policies = (onDefect: IdempotencyPolicy.TimeoutPolicy) => ({
  timeout: "2 seconds" as const,
  onTimeout: "markUnknown" as const,
  onDefect
})

/** The charge every property sends. */
export const charge: typeof Charge.Type = { chargeId: "c-1", cents: 500 }

/** The runs of a configuration that holds, and of one that is caught. */
export const good = { numRuns: 60, seed: 7 } as const
export const bad = { numRuns: 300, seed: 1 } as const

/** A downstream that succeeds or dies after its write, and no faults: where a released defect repeats it. */
export const defectsOnly = { downstream: { kinds: ["Succeed", "ApplyThenDie"] }, faults: false } as const

/** Each property's time, at most. */
export const TIMEOUT = { timeout: 600_000 }

/** A defect released where the downstream does not deduplicate is caught: the write is repeated. */
export const repeats = (report: RetryProperty.Report, operation = "charge-"): void => {
  assert.isFalse(report.passed, report.text)
  assert.include(report.counterexample?.violations.map((violation) => violation._tag) ?? [], "DuplicateWrite")
  assert.include(report.text, operation)
}
