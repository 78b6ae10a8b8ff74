/**
 * Idempotent Lambda functions for any event, decoded with a Schema and keyed by a typed function of it (README.md).
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { LambdaEvent } from "@effect-idempotency/lambda"
 * import { Effect, Schema } from "effect"
 *
 * export const handler = LambdaEvent.idempotent({
 *   name: "ship-order",
 *   layer: IdempotencyStore.layerMemory,
 *   event: Schema.Struct({ detail: Schema.Struct({ orderId: Schema.String }) }),
 *   key: (event) => event.detail.orderId,
 *   success: Schema.Struct({ trackingId: Schema.String }),
 *   handler: (event) => Effect.succeed({ trackingId: `track-${event.detail.orderId}` })
 * })
 * ```
 *
 * @since 0.1.0
 */
import type {
  IdempotencyContext,
  IdempotencyError,
  IdempotencyPolicy,
  IdempotencyStore
} from "@effect-idempotency/core"
import { Idempotency, IdempotencyError as IdempotencyErrors, IdempotencyStore as Store } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as replay from "./internal/replay.js"
import * as internal from "./internal/serve.js"
import { InsufficientTime, InvalidEvent, MissingKey } from "./LambdaError.js"
import * as LambdaInvocation from "./LambdaInvocation.js"

/**
 * A Lambda handler, `handler(event, context)`, with `ready()` and `dispose()` for its runtime.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<Event, Result> {
  (event: Event, context: LambdaInvocation.LambdaContext | LambdaInvocation.DurableContext): Promise<Result>
  readonly ready: () => Promise<void>
  readonly dispose: () => Promise<void>
}

/**
 * The operation behind a handler, for `RetryProperty` (README.md#testing-your-function).
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> {
  readonly name: string
  readonly runDetailed: (
    request: Idempotency.Request<P>
  ) => Effect.Effect<
    Idempotency.Result<A>,
    E | IdempotencyError.IdempotencyError,
    R | IdempotencyStore.IdempotencyStore
  >
}

/**
 * A handler of events that exposes its operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface EventHandler<Ev, IA, A, E, R> extends Handler<unknown, IA> {
  readonly operation: Operation<Ev, A, E, R>
}

/**
 * The options of `idempotent`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Ev, EvI, A, IA, E, EF, IEF, ROut, LE> extends Idempotency.Settings {
  readonly name: string
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  readonly event: Schema.Schema<Ev, EvI>
  /** `undefined` rejects the event with `MissingKey`. */
  readonly key: (event: Ev, context: LambdaInvocation.LambdaContext) => string | undefined
  /** The part of the event the fingerprint covers. Default: the decoded event, encoded again. */
  readonly payload?: ((event: Ev) => unknown) | undefined
  /** Default: the invocation's `tenantId` (README.md#tenants). */
  readonly scope?: ((event: Ev) => string | undefined) | undefined
  readonly success: Schema.Schema<A, IA>
  readonly failure?: Schema.Schema<EF, IEF> | undefined
  readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
  /** Default `LambdaInvocation.defaultMargin` of the remaining time. */
  readonly margin?: Duration.DurationInput | undefined
  readonly handler: (
    event: Ev
  ) => Effect.Effect<
    A,
    E,
    | NoInfer<ROut>
    | IdempotencyStore.IdempotencyStore
    | IdempotencyContext.IdempotencyContext
    | LambdaInvocation.Invocation
  >
}

/** @internal */
export const runIdempotent = <A, IA, E, EF, IEF, R>(
  options: Idempotency.Settings & {
    readonly name: string
    readonly key: string
    readonly fingerprint: unknown
    readonly scope: string | undefined
    readonly success: Schema.Schema<A, IA>
    readonly failure?: Schema.Schema<EF, IEF> | undefined
    readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
    readonly margin?: Duration.DurationInput | undefined
    readonly effect: Effect.Effect<A, E, R>
  }
): Effect.Effect<
  A,
  E | EF | IdempotencyError.IdempotencyError | InsufficientTime,
  Exclude<R, IdempotencyContext.IdempotencyContext> | IdempotencyStore.IdempotencyStore | LambdaInvocation.Invocation
> =>
  Effect.gen(function*() {
    const invocation = yield* LambdaInvocation.Invocation
    const now = yield* Clock.currentTimeMillis
    const remaining = Math.max(0, invocation.deadline - now)
    const margin = options.margin === undefined
      ? LambdaInvocation.defaultMargin(Duration.millis(invocation.deadline - invocation.startedAt))
      : Duration.decode(options.margin)
    const marginMillis = Duration.toMillis(margin)
    if (remaining <= marginMillis) {
      return yield* new InsufficientTime({ remainingMillis: remaining, marginMillis })
    }
    const allowance = LambdaInvocation.answerAllowance(margin)
    const once = Idempotency.once<unknown, unknown, A, IA, EF, IEF>({
      ...options,
      operation: options.name,
      payload: options.fingerprint,
      // See README.md#tenants: the tenant's records are its own
      scope: options.scope ?? invocation.context.tenantId,
      onFailure: options.onFailure as ((error: unknown) => IdempotencyPolicy.FailurePolicy) | undefined,
      // See README.md#per-invocation: the lease covers the invocation
      lease: options.lease ?? Duration.millis(invocation.deadline - now),
      leaseMargin: Duration.subtract(margin, allowance),
      deadline: invocation.deadline - Duration.toMillis(allowance)
    })
    if (invocation.replay !== true) return yield* once(options.effect)
    // See README.md#durable-functions: the replay adopts the record its execution holds; the handler
    // keeps the store as it is
    const store = yield* Store.IdempotencyStore
    return yield* once(Effect.provideService(options.effect, Store.IdempotencyStore, store)).pipe(
      Effect.provideService(Store.IdempotencyStore, replay.adopting(store))
    )
  })

/**
 * An idempotent Lambda function of an event.
 *
 * @since 0.1.0
 * @category constructors
 */
export const idempotent = <Ev, EvI, A, IA, E, ROut, LE, EF = never, IEF = never>(
  options: Options<Ev, EvI, A, IA, E, EF, IEF, ROut, LE>
): EventHandler<Ev, IA, A, E | EF | InsufficientTime | InvalidEvent, ROut> => {
  const decodeEvent = Schema.decodeUnknown(options.event)
  const encodeEvent = Schema.encode(options.event)
  const encodeSuccess = Schema.encode(options.success)
  const invalid = (error: ParseResult.ParseError) =>
    new InvalidEvent({ detail: IdempotencyErrors.describeParseError(error) })
  const run = (event: Ev, key: string, scope: string | undefined) =>
    Effect.flatMap(
      options.payload === undefined
        ? Effect.mapError(encodeEvent(event), invalid)
        : Effect.succeed(options.payload(event)),
      (fingerprint) => runIdempotent({ ...options, effect: options.handler(event), key, fingerprint, scope })
    )
  const handler = internal.serve(options, (raw: unknown) =>
    Effect.gen(function*() {
      const event = yield* Effect.mapError(decodeEvent(raw), invalid)
      const { context } = yield* LambdaInvocation.Invocation
      const key = options.key(event, context)
      if (key === undefined) return yield* new MissingKey()
      const value = yield* run(event, key, options.scope?.(event))
      return yield* Effect.orDie(encodeSuccess(value))
    }))
  return Object.assign(handler, {
    operation: internal.operation(
      options.name,
      (request: Idempotency.Request<Ev>) =>
        run(request.payload, request.key, request.scope ?? options.scope?.(request.payload))
    )
  })
}
