/**
 * Idempotent operations: four entry points (`once`, `fn`, `handler`, `make`), one protocol (README.md#entry-points).
 *
 * @example
 * ```ts
 * import { Idempotency, IdempotencyStore } from "@effect-idempotency/core"
 * import { Effect, Schema } from "effect"
 *
 * const Order = Schema.Struct({ orderId: Schema.String })
 *
 * const program = Effect.succeed({ orderId: "order-1" }).pipe(
 *   Idempotency.once({ operation: "create-order", key: "3f0c5c9e-client-key", payload: { sku: "A-1" }, success: Order }),
 *   Effect.provide(IdempotencyStore.layerMemory)
 * )
 * ```
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type { YieldWrap } from "effect/Utils"
import * as Attempt from "./Attempt.js"
import { inSpan } from "./base/span.js"
import * as Fingerprint from "./Fingerprint.js"
import type * as IdempotencyContext from "./IdempotencyContext.js"
import type { IdempotencyConflict, IdempotencyError } from "./IdempotencyError.js"
import { describeParseError, InvalidPayload, isIdempotencyError } from "./IdempotencyError.js"
import * as IdempotencyKey from "./IdempotencyKey.js"
import type { FailurePolicy, TimeoutPolicy } from "./IdempotencyPolicy.js"
import type { IdempotencyStore } from "./IdempotencyStore.js"
import * as internal from "./internal/attempt/run.js"
import * as Telemetry from "./internal/telemetry.js"
import * as Tracing from "./Tracing.js"

/**
 * The default downstream timeout (`Attempt.DEFAULT_TIMEOUT`).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TIMEOUT: Duration.Duration = Attempt.DEFAULT_TIMEOUT

/**
 * The default time a record lives after its outcome is recorded (`Attempt.DEFAULT_TTL`).
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_TTL: Duration.Duration = Attempt.DEFAULT_TTL

/**
 * The time a lease outlasts the downstream timeout, to record the outcome (`Attempt.LEASE_MARGIN`).
 *
 * @since 0.1.0
 * @category constants
 */
export const LEASE_MARGIN: Duration.Duration = Attempt.LEASE_MARGIN

/**
 * The default retry of a completion that met `StoreUnavailable`: 3 retries, 50 ms doubling.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_COMPLETE_RETRY: Schedule.Schedule<unknown> = Attempt.DEFAULT_COMPLETE_RETRY

/**
 * The time settings and policies every entry point accepts (see `Attempt.Settings`).
 *
 * @since 0.1.0
 * @category models
 */
export type Settings = Attempt.Settings

/**
 * The definition of an idempotent operation, as `make` takes it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options<P, IP, A, IA, E, R, EF, IEF> extends Settings {
  /** The operation's name: the namespace of its records, and the name of its span. */
  readonly name: string
  /** The request payload; the fingerprint is computed over its encoding. */
  readonly payload: Schema.Schema<P, IP>
  /** The success value; stored encoded, decoded on replay. */
  readonly success: Schema.Schema<A, IA>
  /** The domain failures that the `store` policy records and replays. */
  readonly failure?: Schema.Schema<EF, IEF> | undefined
  /** The downstream effect. It may read `IdempotencyContext` (the key, step keys). */
  readonly execute: (payload: P) => Effect.Effect<A, E, R>
  /** The failure policy; default `store` for failures `failure` accepts, else `release` (README.md#policies). */
  readonly onFailure?: ((error: E) => FailurePolicy) | undefined
  /** Key validation options (the maximum length). */
  readonly key?: IdempotencyKey.Options | undefined
}

/**
 * One call of an operation (see `Attempt.Request`).
 *
 * @since 0.1.0
 * @category models
 */
export type Request<P> = Attempt.Request<P>

/**
 * A success, and how it came about: `Idempotency.result` gives it for any run (see `Attempt.Result`).
 *
 * @since 0.1.0
 * @category models
 */
export type Result<A> = Attempt.Result<A>

/**
 * An idempotent operation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Operation<P, A, E, R> {
  readonly name: string
  /** Runs the operation: a fresh execution or a replay of the recorded outcome. */
  readonly run: (request: Request<P>) => Effect.Effect<A, E | IdempotencyError, R | IdempotencyStore>
  /** Like `run`, with the `Result` (the same as `Idempotency.result(run(request))`). */
  readonly runDetailed: (request: Request<P>) => Effect.Effect<Result<A>, E | IdempotencyError, R | IdempotencyStore>
}

/** A payload's fingerprint under `schema`: a plain `Either` when the schema is synchronous. */
const fingerprintWith = <P, IP>(schema: Schema.Schema<P, IP>) => {
  const encode = Schema.encode(schema)
  return (payload: P): Effect.Effect<string, ParseResult.ParseError> =>
    ParseResult.flatMap(encode(payload), Fingerprint.fromEncodedEither)
}

const operationOf = <P, IP, A, IA, E, R, EF, IEF>(
  options: Omit<Options<P, IP, A, IA, E, R, EF, IEF>, "payload"> & {
    readonly fingerprint: (payload: P) => Effect.Effect<string, ParseResult.ParseError>
  }
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> => {
  const failureSchema = options.failure
  const isStorableFailure = failureSchema === undefined ? () => false : Schema.is(failureSchema)
  const attempt = internal.make<P, A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>({
    name: options.name,
    settings: Attempt.resolve(options.name, options),
    fingerprint: options.fingerprint,
    encodeSuccess: Schema.encode(options.success),
    decodeSuccess: Schema.decodeUnknown(options.success),
    encodeFailure: failureSchema === undefined
      ? undefined
      : (error) => Schema.encodeUnknown(failureSchema)(error),
    decodeFailure: failureSchema === undefined ? undefined : Schema.decodeUnknown(failureSchema),
    failurePolicy: (error) =>
      options.onFailure !== undefined ? options.onFailure(error) : isStorableFailure(error) ? "store" : "release",
    key: options.key,
    // the context is provided by the attempt
    execute: options.execute as (payload: P) => Effect.Effect<A, E, Exclude<R, IdempotencyContext.IdempotencyContext>>
  })
  const runDetailed = attempt.runDetailed as Operation<
    P,
    A,
    E | EF,
    Exclude<R, IdempotencyContext.IdempotencyContext>
  >["runDetailed"]
  return {
    name: options.name,
    runDetailed,
    run: (request) => Effect.map(runDetailed(request), (result) => result.value)
  }
}

/**
 * Defines an idempotent operation from its full option set.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>
): Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>> =>
  operationOf({ ...options, fingerprint: fingerprintWith(options.payload) })

/**
 * Defines an operation as `make` does, each setting the `Config` provides overriding its option.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeConfig = <P, IP, A, IA, E, R, EF = never, IEF = never>(
  options: Options<P, IP, A, IA, E, R, EF, IEF>,
  config: Config.Config.Wrap<ConfigSettings>
): Effect.Effect<Operation<P, A, E | EF, Exclude<R, IdempotencyContext.IdempotencyContext>>, ConfigError.ConfigError> =>
  Effect.map(Config.unwrap(config), (settings) => {
    const merged: Record<string, unknown> = { ...options }
    for (const [name, value] of Object.entries(settings)) {
      if (value !== undefined) merged[name] = value
    }
    return make(merged as unknown as Options<P, IP, A, IA, E, R, EF, IEF>)
  })

/**
 * The settings `makeConfig` reads: the durations and the timeout and defect policies.
 *
 * @since 0.1.0
 * @category models
 */
export interface ConfigSettings
  extends
    Pick<Settings, "timeout" | "lease" | "leaseMargin" | "heartbeat" | "maxHold" | "ttl" | "onTimeout" | "onDefect">
{}

/**
 * A config of a timeout policy by name (`keepLease`, `release`, `markUnknown`).
 *
 * @since 0.1.0
 * @category config
 */
export const timeoutPolicyConfig = (name: string): Config.Config<TimeoutPolicy> =>
  Config.literal("keepLease", "release", "markUnknown")(name)

/**
 * The options of `once`: the request (`key`, `payload`, `scope`), its schemas, and the settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface OnceOptions<P, IP, A, IA, EF, IEF> extends Settings {
  /** The operation's name: the namespace of its records, and the name of its span. */
  readonly operation: string
  /** The client's key (bare or quoted); validated before any store is touched. */
  readonly key: string
  /** The request. Its fingerprint tells a key reused with another request (`KeyReused`). */
  readonly payload: P
  /** The payload's schema, for the fingerprint; default: the payload as it is (README.md#entry-points). */
  readonly payloadSchema?: Schema.Schema<P, IP> | undefined
  /** The success value; stored encoded, decoded on replay. */
  readonly success: Schema.Schema<A, IA>
  /** The domain failures that the `store` policy records and replays. */
  readonly failure?: Schema.Schema<EF, IEF> | undefined
  /** The failure policy (see `Options.onFailure`). */
  readonly onFailure?: ((error: unknown) => FailurePolicy) | undefined
  /** A tenant or user id: keys of different scopes never share a record. */
  readonly scope?: string | undefined
  /** When the attempt must have answered (see `Request.deadline`). */
  readonly deadline?: number | undefined
  /** Key validation options (the maximum length). */
  readonly keyOptions?: IdempotencyKey.Options | undefined
}

/**
 * Protects an effect you already have: at most once per key, every retry gets the recorded outcome.
 *
 * @since 0.1.0
 * @category combinators
 */
export const once: {
  <P, IP, A, IA, EF = never, IEF = never>(
    options: OnceOptions<P, IP, A, IA, EF, IEF>
  ): <E, R>(
    self: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | EF | IdempotencyError, Exclude<R, IdempotencyContext.IdempotencyContext> | IdempotencyStore>
  <A, E, R, P, IP, IA, EF = never, IEF = never>(
    self: Effect.Effect<A, E, R>,
    options: OnceOptions<P, IP, A, IA, EF, IEF>
  ): Effect.Effect<A, E | EF | IdempotencyError, Exclude<R, IdempotencyContext.IdempotencyContext> | IdempotencyStore>
} = dual(2, <A, E, R, P, IP, IA, EF, IEF>(
  self: Effect.Effect<A, E, R>,
  options: OnceOptions<P, IP, A, IA, EF, IEF>
) => {
  const schema = options.payloadSchema
  const operation = operationOf<P, IP, A, IA, E, R, EF, IEF>({
    ...options,
    name: options.operation,
    key: options.keyOptions,
    fingerprint: schema === undefined
      ? Fingerprint.fromEncodedEither
      : fingerprintWith(schema),
    execute: () => self
  })
  return operation.run({
    key: options.key,
    payload: options.payload,
    scope: options.scope,
    deadline: options.deadline
  })
})

/**
 * One call of an operation, without its payload: what `handler` functions take next to the request.
 *
 * @since 0.1.0
 * @category models
 */
export type Call = Omit<Request<never>, "payload">

/**
 * An operation from a request class, callable as a function of the request and the call.
 *
 * @since 0.1.0
 * @category models
 */
export interface Handler<Req, A, E, R> extends Operation<Req, A, E, R> {
  (request: Req, call: Call): Effect.Effect<A, E | IdempotencyError, R | IdempotencyStore>
}

/**
 * The settings of `handler` and `fn`, with the failure policy.
 *
 * @since 0.1.0
 * @category models
 */
export interface HandlerSettings<E> extends Settings {
  /** The operation's name (default: the request's tag for `handler`). */
  readonly name?: string | undefined
  /** The failure policy (see `Options.onFailure`). */
  readonly onFailure?: ((error: E) => FailurePolicy) | undefined
  /** Key validation options (the maximum length). */
  readonly key?: IdempotencyKey.Options | undefined
}

/**
 * An operation from a `Schema.TaggedRequest` class: its payload, success and failure, its tag as name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const handler = <
  Self,
  Tag extends string,
  Payload extends Schema.Struct.Fields,
  Success extends Schema.Schema.AnyNoContext,
  Failure extends Schema.Schema.AnyNoContext,
  R
>(
  request:
    & Schema.TaggedRequestClass<Self, Tag, Payload, Success, Failure>
    & Schema.Schema<Self, Schema.Struct.Encoded<Payload>, never>,
  handle: (request: Self) => Effect.Effect<Schema.Schema.Type<Success>, Schema.Schema.Type<Failure>, R>,
  settings?: HandlerSettings<Schema.Schema.Type<Failure>>
): Handler<
  Self,
  Schema.Schema.Type<Success>,
  Schema.Schema.Type<Failure>,
  Exclude<R, IdempotencyContext.IdempotencyContext>
> => {
  const operation = make({
    ...settings,
    name: settings?.name ?? request._tag,
    payload: request as Schema.Schema<Self, Schema.Struct.Encoded<Payload>>,
    success: request.success as Schema.Schema<Schema.Schema.Type<Success>, Schema.Schema.Encoded<Success>>,
    failure: request.failure as Schema.Schema<Schema.Schema.Type<Failure>, Schema.Schema.Encoded<Failure>>,
    execute: handle
  })
  const call = (payload: Self, options: Call) => operation.run({ ...options, payload })
  // a function's own `name` is read-only: it is defined, not assigned
  Object.defineProperty(call, "name", { value: operation.name })
  return Object.assign(call, { run: operation.run, runDetailed: operation.runDetailed })
}

type ErrorOf<Eff> = [Eff] extends [never] ? never
  : [Eff] extends [YieldWrap<Effect.Effect<infer _A, infer E, infer _R>>] ? E
  : never

type ContextOf<Eff> = [Eff] extends [never] ? never
  : [Eff] extends [YieldWrap<Effect.Effect<infer _A, infer _E, infer R>>] ? R
  : never

/**
 * The options of `fn`: the schemas and the settings.
 *
 * @since 0.1.0
 * @category models
 */
export interface FnOptions<P, IP, A, IA, EF, IEF> extends HandlerSettings<unknown> {
  readonly payload: Schema.Schema<P, IP>
  readonly success: Schema.Schema<A, IA>
  readonly failure?: Schema.Schema<EF, IEF> | undefined
}

/**
 * Defines an operation with a generator body, as `Effect.fn` does.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fn = <P, IP, A, IA, EF = never, IEF = never>(
  name: string,
  options: FnOptions<P, IP, A, IA, EF, IEF>
) =>
<Eff extends YieldWrap<Effect.Effect<unknown, unknown, unknown>>>(
  body: (payload: P) => Generator<Eff, A, never>
): Operation<P, A, ErrorOf<Eff> | EF, Exclude<ContextOf<Eff>, IdempotencyContext.IdempotencyContext>> =>
  make({
    ...options,
    name,
    execute: Effect.fnUntraced(body) as (payload: P) => Effect.Effect<A, ErrorOf<Eff>, ContextOf<Eff>>
  })

/**
 * The `Result` of an effect made of idempotent runs, from any entry point (of several, the last).
 *
 * @since 0.1.0
 * @category combinators
 */
export const result = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<Result<A>, E, R> =>
  Effect.suspend(() => {
    let last: Result<unknown> | undefined
    const sink = (run: Result<unknown>) =>
      Effect.sync(() => {
        last = run
      })
    return Effect.map(
      Effect.locally(self, internal.currentResultSink, sink),
      (value): Result<A> =>
        last === undefined
          ? { value, replayed: false, attempt: 0, recorded: false }
          : { value, replayed: last.replayed, attempt: last.attempt, recorded: last.recorded }
    )
  })

/**
 * Reports a run's `Result` to the `result` around it, for operations built outside this module.
 *
 * @since 0.1.0
 * @category utils
 */
export const reportResult = <A>(run: Result<A>): Effect.Effect<void> =>
  Effect.flatMap(FiberRef.get(internal.currentResultSink), (sink) => sink === undefined ? Effect.void : sink(run))

/**
 * A run of an operation built outside this module, instrumented as `make`'s are (README.md#engines-of-your-own).
 *
 * @since 0.1.0
 * @category utils
 */
export const instrumented = (operation: string, key: unknown) => {
  const report = Telemetry.reporter(operation)
  const spanOptions = { attributes: { "idempotency.operation": operation }, captureStackTrace: false } as const
  const outcomeOf = <A, E>(exit: Exit.Exit<Result<A>, E>): Telemetry.Outcome =>
    Exit.isSuccess(exit) ? Telemetry.ofResult(exit.value) : Telemetry.ofCause(exit.cause)
  return <A, E, R>(run: Effect.Effect<Result<A>, E, R>): Effect.Effect<Result<A>, E, R> =>
    Effect.withFiberRuntime((fiber) => {
      const clock = Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock)
      const startedAt = clock.unsafeCurrentTimeMillis()
      const reported = Effect.tap(run, reportResult)
      const traced = !Tracing.unsafeIsEnabled(fiber) ? reported : inSpan(
        reported,
        operation,
        spanOptions,
        (span, exit) => {
          span.attribute("idempotency.outcome", outcomeOf(exit))
          if (typeof key === "string") span.attribute("idempotency.key_hash", IdempotencyKey.hash(key))
        }
      )
      return Effect.onExit(traced, (exit) =>
        Effect.sync(() =>
          report(
            outcomeOf(exit),
            clock.unsafeCurrentTimeMillis() - startedAt,
            fiber.getFiberRef(FiberRef.currentMetricLabels)
          )
        ))
    })
}

/**
 * An attempt's time limits as `Attempt.window` gives them (throwing its `InvalidSettings`): the
 * downstream's `timeoutMillis` (0 or less: no time), its end `until`, and the attempt's `end`.
 *
 * @since 0.1.0
 * @category engines
 */
export const attemptWindow = (options: {
  readonly request: Request<unknown>
  readonly timeout: Duration.Duration
  readonly margin: Duration.Duration
  readonly now: number
}): { readonly timeoutMillis: number; readonly until: number; readonly end: number } =>
  Either.getOrThrow(Attempt.window({ ...options, operation: "attemptWindow" }))

/**
 * Runs `attempt` again on `IdempotencyConflict` as `schedule` allows, its waits cut off at `until`.
 *
 * @since 0.1.0
 * @category engines
 */
export const retryOnConflict = <A, E, R>(
  attempt: Effect.Effect<A, E, R>,
  schedule: Schedule.Schedule<unknown, IdempotencyConflict>,
  until: number
): Effect.Effect<A, E, R> =>
  Effect.flatMap(Schedule.driver(schedule), (driver) => {
    const loop: Effect.Effect<A, E, R> = Effect.catchIf(
      attempt,
      (error): error is E & IdempotencyConflict => isIdempotencyError(error) && error._tag === "IdempotencyConflict",
      (conflict) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const last = Effect.fail(conflict)
          return now >= until ? last : Effect.matchEffect(
            Effect.timeoutOption(driver.next(conflict), Duration.millis(until - now)),
            { onFailure: () => last, onSuccess: (waited) => Option.isSome(waited) ? loop : last }
          )
        })
    )
    return loop
  })

/**
 * A payload's fingerprint as operation `name` takes it; `InvalidPayload` when it cannot be computed.
 *
 * @since 0.1.0
 * @category engines
 */
export const fingerprintOf = <P, IP>(
  name: string,
  schema: Schema.Schema<P, IP>
): (payload: P) => Effect.Effect<Fingerprint.Fingerprint, InvalidPayload> => {
  const fingerprint = Fingerprint.make(schema)
  return (payload) =>
    Effect.suspend(() => fingerprint(payload)).pipe(
      Effect.mapError((error) => new InvalidPayload({ operation: name, detail: describeParseError(error) })),
      Effect.catchAllDefect(() =>
        Effect.fail(new InvalidPayload({ operation: name, detail: "the payload cannot be fingerprinted" }))
      )
    )
}

/**
 * The fingerprint of a payload under an operation's payload schema (for inspection and tests).
 *
 * @since 0.1.0
 * @category utils
 */
export const fingerprint = <P, IP>(
  schema: Schema.Schema<P, IP>,
  payload: P
): Effect.Effect<Fingerprint.Fingerprint, ParseResult.ParseError> => Fingerprint.make(schema)(payload)
