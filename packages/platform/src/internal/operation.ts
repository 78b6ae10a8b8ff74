import type { IdempotencyStore } from "@effect-idempotency/core"
import { HttpIdempotency } from "@effect-idempotency/http"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { currentOperation } from "./protect.js"

/**
 * The idempotent route a request reaches reports the protocol's answer: the operation's result.
 *
 * @internal
 */
export const make = <E, R>(
  name: string,
  app: HttpApp.Default<E, R>,
  route: {
    readonly header?: string | undefined
    readonly method?: string | undefined
    readonly path?: string | undefined
  }
): HttpIdempotency.Operation<
  E,
  Exclude<R, HttpServerRequest.HttpServerRequest | Scope.Scope | IdempotencyStore.IdempotencyStore>
> =>
  HttpIdempotency.operation(name, (request, cutOff) =>
    Effect.suspend(() => {
      let answer: HttpIdempotency.Answer<unknown> | undefined
      const report = (reported: HttpIdempotency.Answer<unknown>) => {
        answer = reported
      }
      return app.pipe(
        Effect.provideService(
          HttpServerRequest.HttpServerRequest,
          HttpServerRequest.fromWeb(HttpIdempotency.webRequest(request, route))
        ),
        Effect.locally(currentOperation, { cutOff, scope: request.scope, report }),
        Effect.scoped,
        Effect.flatMap((): Effect.Effect<HttpIdempotency.Answer<unknown>> =>
          answer === undefined
            ? Effect.dieMessage(`${name}: the request did not reach an idempotent route (its method, its path?)`)
            : Effect.succeed(answer)
        )
      )
    })) as HttpIdempotency.Operation<
      E,
      Exclude<R, HttpServerRequest.HttpServerRequest | Scope.Scope | IdempotencyStore.IdempotencyStore>
    >
