/**
 * Idempotent Lambda functions for any event: EventBridge, S3, direct and asynchronous invocations,
 * Step Functions tasks. The event is decoded with a Schema; the key comes from a typed function of
 * the decoded event (where Powertools takes a JMESPath, `eventKeyJmesPath`), and the request's
 * fingerprint from the event or a chosen part of it (`payloadValidationJmesPath`).
 *
 * Per invocation: the event is decoded (an `InvalidEvent` otherwise), the key read, and the handler
 * run inside `Idempotency.once`, within the time Lambda leaves the invocation less a margin, so the
 * outcome is recorded before Lambda stops the function. The lease covers the invocation's remaining
 * time. The result is the handler's value, encoded with `success` (what Lambda serializes); a replay
 * returns the recorded one. A failure is rejected with the error itself, so an asynchronous
 * invocation is retried by Lambda as usual: a stored failure is rejected again on every retry, and
 * the handler does not run.
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
import { Idempotency, IdempotencyError as IdempotencyErrors } from "@effect-idempotency/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import * as internal from "./internal/serve.js"
import { InsufficientTime, InvalidEvent, MissingKey } from "./LambdaError.js"
import * as LambdaInvocation from "./LambdaInvocation.js"

/**
 * A Lambda handler: call it as Lambda does, `handler(event, context)`, with a context whose
 * `getRemainingTimeInMillis` tells the time left. It resolves with the function's result, or rejects
 * with the error Lambda reports. A test calls it the same way, or with `LambdaTest.invoke`, which
 * makes the context and cuts the invocation off at its timeout as Lambda does. Its runtime (the
 * layer: the store's connections) is built once per execution environment, on the first invocation
 * unless `ready` started it.
 *
 * @example
 * ```ts
 * import { IdempotencyStore } from "@effect-idempotency/core"
 * import { LambdaEvent, LambdaTest } from "@effect-idempotency/lambda"
 * import { Effect, Schema } from "effect"
 *
 * export const handler = LambdaEvent.idempotent({
 *   name: "ship-order",
 *   layer: IdempotencyStore.layerMemoryWith({ warn: false }),
 *   event: Schema.Struct({ orderId: Schema.String }),
 *   key: (event) => event.orderId,
 *   success: Schema.Struct({ trackingId: Schema.String }),
 *   handler: (event) => Effect.succeed({ trackingId: `track-${event.orderId}` })
 * })
 *
 * // at the module's top level: the runtime is built during Lambda's init phase
 * await handler.ready()
 *
 * // what Lambda does on each invocation (a test or a local run too)
 * const result = await handler({ orderId: "o-1" }, LambdaTest.context({ remaining: "3 seconds" }))
 * console.log(result) // { trackingId: "track-o-1" }
 *
 * // at the end of a test or a local run: the store's connections are released
 * await handler.dispose()
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<Event, Result> {
  (event: Event, context: LambdaInvocation.LambdaContext): Promise<Result>
  /**
   * Builds the runtime now, and resolves once it is built or its build failed (the next invocation
   * then builds again). `await handler.ready()` at the top level of an ES module makes the build
   * part of Lambda's init phase, which does not count against an invocation's time. Without it, the
   * first invocation waits for the build while it could still run and record its outcome; past that
   * point it fails with `InsufficientTime` before Lambda's cut-off (no store touched), and the build
   * goes on for the next invocation.
   */
  readonly ready: () => Promise<void>
  /** Releases the runtime (the store's connections): at the end of a test or a local run. */
  readonly dispose: () => Promise<void>
}

/**
 * The operation behind a handler, one request at a time, with the handler's name, schemas, policies
 * and settings: give it to `RetryProperty` (`operation: handler.operation`) to property-test the
 * configuration you deploy rather than a copy of it. A request's `payload` is the decoded event (a
 * record's decoded body for `LambdaSqs`) and its `key` the idempotency key; the handler runs as in an
 * invocation that ends at the request's `deadline`, else its `timeout` from now, else 3 seconds from
 * now (Lambda's default time limit).
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
 * An idempotent function of an event.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<Ev, EvI, A, IA, E, EF, IEF, ROut, LE> extends Idempotency.Settings {
  /** The operation's name: the namespace of its records. */
  readonly name: string
  /** The services of the handler, the `IdempotencyStore` among them; built once per execution environment. */
  readonly layer: Layer.Layer<ROut | IdempotencyStore.IdempotencyStore, LE>
  /** The event, decoded with this schema. */
  readonly event: Schema.Schema<Ev, EvI>
  /** The idempotency key of an event (validated as any key); `undefined` rejects it with `MissingKey`. */
  readonly key: (event: Ev, context: LambdaInvocation.LambdaContext) => string | undefined
  /**
   * The part of the event the fingerprint covers: a retry with the same key and another value of it
   * fails with `KeyReused`. Default: the decoded event, encoded again with `event` (the order of
   * members and members the schema does not declare do not count).
   */
  readonly payload?: ((event: Ev) => unknown) | undefined
  /** A tenant or user id: keys of different scopes never share a record. */
  readonly scope?: ((event: Ev) => string | undefined) | undefined
  /** The handler's success: recorded encoded, and the encoded value is the function's result. */
  readonly success: Schema.Schema<A, IA>
  /** The domain failures recorded and rejected again to every retry (see `Idempotency.Options.failure`). */
  readonly failure?: Schema.Schema<EF, IEF> | undefined
  /** The failure policy (see `Idempotency.Options.onFailure`). */
  readonly onFailure?: ((error: E) => IdempotencyPolicy.FailurePolicy) | undefined
  /**
   * The time kept between the end of the handler and the moment Lambda stops the invocation, to
   * record the outcome. Default `LambdaInvocation.defaultMargin` of the remaining time (a quarter,
   * at most 1 second).
   */
  readonly margin?: Duration.DurationInput | undefined
  /** The handler: it runs at most once per key while its record lives (within the policies). */
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

/**
 * Runs one decoded event through the operation, within the invocation's time. Shared by the batch
 * adapters.
 *
 * @internal
 */
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
    return yield* options.effect.pipe(
      Idempotency.once<unknown, unknown, A, IA, EF, IEF>({
        ...options,
        operation: options.name,
        payload: options.fingerprint,
        onFailure: options.onFailure as ((error: unknown) => IdempotencyPolicy.FailurePolicy) | undefined,
        // the lease covers the invocation: no retry takes over an attempt that may still run
        lease: options.lease ?? Duration.millis(invocation.deadline - now),
        leaseMargin: Duration.subtract(margin, allowance),
        deadline: invocation.deadline - Duration.toMillis(allowance)
      })
    )
  })

/**
 * An idempotent Lambda function of an event (see the module's documentation).
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
  /** The decoded event through the operation, under `key`. */
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
