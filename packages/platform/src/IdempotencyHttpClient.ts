/**
 * Downstream key forwarding for `@effect/platform`'s `HttpClient` (README.md#key-forwarding-on-httpclient).
 *
 * @example
 * ```ts
 * import { IdempotencyHttpClient } from "@effect-idempotency/platform"
 * import { FetchHttpClient, HttpClient } from "@effect/platform"
 * import { Effect } from "effect"
 *
 * const charge = Effect.gen(function*() {
 *   const client = (yield* HttpClient.HttpClient).pipe(IdempotencyHttpClient.forwardKey())
 *   return yield* client.post("https://payments.example/charges")
 * }).pipe(IdempotencyHttpClient.withStep("charge"), Effect.provide(FetchHttpClient.layer))
 * ```
 *
 * @since 0.1.0
 */
import { IdempotencyContext } from "@effect-idempotency/core"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpMethod from "@effect/platform/HttpMethod"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import { dual } from "effect/Function"
import { globalValue } from "effect/GlobalValue"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"

/**
 * The header the key is sent in (IETF draft "The Idempotency-Key HTTP Header Field").
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER = "Idempotency-Key"

/**
 * The methods that get a key by default: the ones that are not idempotent, or not safe to repeat
 * blindly, by HTTP semantics.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_METHODS: ReadonlyArray<HttpMethod.HttpMethod> = ["POST", "PATCH", "PUT", "DELETE"]

/**
 * Options of key forwarding.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly header?: string | undefined
  readonly methods?: ReadonlyArray<HttpMethod.HttpMethod> | undefined
  readonly step?: ((request: HttpClientRequest.HttpClientRequest) => string) | undefined
  readonly quoted?: boolean | undefined
}

/**
 * The step name set by `withStep` for the requests of the current fiber.
 *
 * @since 0.1.0
 * @category fiber refs
 */
export const currentStep: FiberRef.FiberRef<Option.Option<string>> = globalValue(
  Symbol.for("@effect-idempotency/platform/IdempotencyHttpClient/currentStep"),
  () => FiberRef.unsafeMake(Option.none<string>())
)

/**
 * Names the downstream step of the requests an effect sends.
 *
 * @since 0.1.0
 * @category combinators
 */
export const withStep: {
  (step: string): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, step: string): Effect.Effect<A, E, R>
} = dual(
  2,
  <A, E, R>(self: Effect.Effect<A, E, R>, step: string): Effect.Effect<A, E, R> =>
    Effect.locally(self, currentStep, Option.some(step))
)

/**
 * The default step of a request: `POST https://api.example/orders`.
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultStep = (request: HttpClientRequest.HttpClientRequest): string => `${request.method} ${request.url}`

/**
 * The key a request gets inside the current attempt, if any.
 *
 * @since 0.1.0
 * @category utils
 */
export const keyFor = (
  request: HttpClientRequest.HttpClientRequest,
  options?: Options
): Effect.Effect<Option.Option<string>> => {
  const header = (options?.header ?? HEADER).toLowerCase()
  const methods = options?.methods ?? DEFAULT_METHODS
  if (!methods.includes(request.method) || request.headers[header] !== undefined) {
    return Effect.succeed(Option.none())
  }
  return Effect.flatMap(IdempotencyContext.current, (context) => {
    if (Option.isNone(context)) return Effect.succeed(Option.none())
    return Effect.map(FiberRef.get(currentStep), (named) => {
      const step = Option.getOrElse(named, () => (options?.step ?? defaultStep)(request))
      const key = context.value.stepKey(step)
      return Option.some(options?.quoted === true ? `"${key}"` : key)
    })
  })
}

/**
 * Sets the key of the current attempt's step on outgoing requests.
 *
 * @since 0.1.0
 * @category combinators
 */
export const forwardKey: {
  (options?: Options): <E, R>(self: HttpClient.HttpClient.With<E, R>) => HttpClient.HttpClient.With<E, R>
  <E, R>(self: HttpClient.HttpClient.With<E, R>, options?: Options): HttpClient.HttpClient.With<E, R>
} = dual(
  (args) => Predicate.hasProperty(args[0], HttpClient.TypeId),
  <E, R>(self: HttpClient.HttpClient.With<E, R>, options?: Options): HttpClient.HttpClient.With<E, R> => {
    const header = options?.header ?? HEADER
    return HttpClient.mapRequestEffect(self, (request) =>
      Effect.map(
        keyFor(request, options),
        Option.match({
          onNone: () => request,
          onSome: (key) => HttpClientRequest.setHeader(request, header, key)
        })
      ))
  }
)

/**
 * Replaces the `HttpClient` in the context with one that forwards keys, with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options?: Options): Layer.Layer<HttpClient.HttpClient, never, HttpClient.HttpClient> =>
  Layer.effect(HttpClient.HttpClient, Effect.map(HttpClient.HttpClient, (client) => forwardKey(client, options)))

/**
 * Replaces the `HttpClient` in the context with one that forwards keys.
 *
 * @example
 * ```ts
 * import { IdempotencyHttpClient } from "@effect-idempotency/platform"
 * import { FetchHttpClient } from "@effect/platform"
 * import { Layer } from "effect"
 *
 * const HttpClientLive = IdempotencyHttpClient.layer.pipe(Layer.provide(FetchHttpClient.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<HttpClient.HttpClient, never, HttpClient.HttpClient> = layerWith()
