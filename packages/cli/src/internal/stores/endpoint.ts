/**
 * The admin service through an admin endpoint (`IdempotencyAdminApi`), over fetch.
 *
 * @internal
 */
import { IdempotencyAdminApi } from "@effect-idempotency/platform"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvalidStore } from "../../CliError.js"
import type { StoreTarget } from "../../StoreTarget.js"
import { StoreSchema } from "../../StoreTarget.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "Endpoint" }>) =>
  Layer.merge(
    IdempotencyAdminApi.layerClient({ baseUrl: target.url, token: target.token }).pipe(
      Layer.provide(FetchHttpClient.layer)
    ),
    Layer.succeed(StoreSchema, {
      migrate: Effect.fail(
        new InvalidStore({
          reason: "a store behind an admin endpoint is migrated where it runs (migrate: true, or your migrations)"
        })
      )
    })
  )
