/**
 * `@effect/workflow` activities whose side effect runs once per execution (README.md#what-it-guarantees).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { IdempotentActivity } from "@effect-idempotency/workflow"
 * import { Workflow, WorkflowEngine } from "@effect/workflow"
 * import { Effect, Layer, Schema } from "effect"
 *
 * class CardDeclined extends Schema.TaggedError<CardDeclined>()("CardDeclined", {}) {}
 *
 * const Checkout = Workflow.make({
 *   name: "Checkout",
 *   payload: { orderId: Schema.String, amountCents: Schema.Int },
 *   success: Schema.String,
 *   error: Schema.Unknown,
 *   idempotencyKey: ({ orderId }) => orderId
 * })
 *
 * const CheckoutLive = Checkout.toLayer(({ orderId, amountCents }) =>
 *   IdempotentActivity.make({
 *     name: "charge",
 *     success: Schema.Struct({ chargeId: Schema.String }),
 *     error: CardDeclined,
 *     payload: { orderId, amountCents },
 *     execute: Effect.succeed({ chargeId: `ch_${orderId}` })
 *   }).pipe(Effect.map(({ chargeId }) => chargeId))
 * )
 *
 * const chargeId = Checkout.execute({ orderId: "order-1", amountCents: 1999 }).pipe(
 *   Effect.provide(CheckoutLive.pipe(
 *     Layer.provideMerge(WorkflowEngine.layerMemory),
 *     Layer.provideMerge(IdempotencyStore.layerMemory)
 *   ))
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { IdempotencyContext, IdempotencyStore } from "@effect-idempotency/core"
import { Idempotency, IdempotencyError } from "@effect-idempotency/core"
import type { FailurePolicy } from "@effect-idempotency/core/IdempotencyPolicy"
import * as Activity from "@effect/workflow/Activity"
import type { WorkflowInstance } from "@effect/workflow/WorkflowEngine"
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"

/**
 * Every error the idempotency layer can add to an activity, as one schema (part of its error schema).
 *
 * @since 0.1.0
 * @category schemas
 */
export const IdempotencyErrors = Schema.Union(
  IdempotencyError.InvalidIdempotencyKey,
  IdempotencyError.IdempotencyConflict,
  IdempotencyError.KeyReused,
  IdempotencyError.DownstreamTimeout,
  IdempotencyError.LeaseLost,
  IdempotencyError.CleanupFailed,
  IdempotencyError.StoreUnavailable,
  IdempotencyError.StoreError,
  IdempotencyError.StoredOutcomeInvalid,
  IdempotencyError.OutcomeNotReplayable,
  IdempotencyError.InvalidPayload,
  IdempotencyError.InvalidSettings
)

/**
 * How long a run waits for another run of the same activity: longer than the default lease.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CONFLICT_WAIT: Duration.Duration = Duration.minutes(1)

// waits as long as the holder's lease has left, between 10 ms and a second
const conflictSchedule: Schedule.Schedule<unknown, IdempotencyError.IdempotencyConflict> = Schedule.identity<
  IdempotencyError.IdempotencyConflict
>().pipe(
  Schedule.addDelay((conflict) => Duration.millis(Math.min(1000, Math.max(10, conflict.retryAfterMillis))))
)

/**
 * What `make` takes: `Activity.make`'s options, the idempotency settings, and what the activity acts
 * on.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<
  Success extends Schema.Schema.AnyNoContext,
  Error extends Schema.Schema.All,
  R,
  P,
  IP
> extends Idempotency.Settings {
  /** The activity's name: unique in its workflow, the operation of its records. */
  readonly name: string
  /** The success value: stored encoded by both the engine and the store. Default `Schema.Void`. */
  readonly success?: Success | undefined
  /** The domain failures the `store` policy records and replays. Default `Schema.Never`. */
  readonly error?: Error | undefined
  /** The side effect. It may read `IdempotencyContext` (the key, to forward downstream). */
  readonly execute: Effect.Effect<Success["Type"], Error["Type"], R>
  /**
   * What the activity acts on (usually from the workflow's payload): a re-execution of the
   * workflow under the same idempotency key with another payload fails with `KeyReused` instead
   * of replaying an outcome that belongs to other input. Default: nothing is compared.
   */
  readonly payload?: P | undefined
  /** The payload's schema, for its fingerprint; default: the payload as it is. */
  readonly payloadSchema?: Schema.Schema<P, IP> | undefined
  /** The failure policy (see `Idempotency.Options.onFailure`). */
  readonly onFailure?: ((error: unknown) => FailurePolicy) | undefined
  /** A tenant id: the same execution under different scopes never shares a record. */
  readonly scope?: string | undefined
  /**
   * How long a run that finds the key held by another run waits for it (retrying when the holder's
   * lease says), before it fails with `IdempotencyConflict`. Default `DEFAULT_CONFLICT_WAIT`.
   */
  readonly conflictWait?: Duration.DurationInput | undefined
  /** `Activity.make`'s schedule for interrupted runs. */
  readonly interruptRetryPolicy?: Schedule.Schedule<unknown, Cause.Cause<unknown>> | undefined
}

/**
 * An activity whose `execute` runs at most once per execution and name (README.md#what-it-guarantees).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <
  R,
  Success extends Schema.Schema.AnyNoContext = typeof Schema.Void,
  Error extends Schema.Schema.All = typeof Schema.Never,
  P = null,
  IP = P
>(
  options: Options<Success, Error, R, P, IP>
): Activity.Activity<
  Success,
  Schema.Union<[Error, typeof IdempotencyErrors]>,
  Exclude<R, WorkflowInstance | IdempotencyContext.IdempotencyContext> | IdempotencyStore.IdempotencyStore
> => {
  const conflictWait = Duration.toMillis(options.conflictWait ?? DEFAULT_CONFLICT_WAIT)
  const success = (options.success ?? Schema.Void) as Success
  const error = (options.error ?? Schema.Never) as Error
  const failure = error as unknown as Schema.Schema<Error["Type"], Error["Encoded"]>
  const once = (key: string) =>
    Idempotency.once<P, IP, Success["Type"], Success["Encoded"], Error["Type"], Error["Encoded"]>({
      ...options,
      operation: options.name,
      key,
      payload: (options.payload ?? null) as P,
      success,
      failure
    })
  return Activity.make({
    name: options.name,
    success,
    error: Schema.Union(error, IdempotencyErrors),
    interruptRetryPolicy: options.interruptRetryPolicy,
    execute: Effect.flatMap(Activity.idempotencyKey(options.name), (key) =>
      options.execute.pipe(
        once(key),
        (attempt) =>
          Effect.flatMap(
            Clock.currentTimeMillis,
            (now) => Idempotency.retryOnConflict(attempt, conflictSchedule, now + conflictWait)
          )
      ))
  })
}
