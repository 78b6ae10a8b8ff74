/**
 * The DynamoDB store of a target.
 *
 * @internal
 */
import { IdempotencyAdmin } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type { MigrateResult, StoreTarget } from "../../StoreTarget.js"
import { StoreSchema } from "../../StoreTarget.js"

/** @internal */
export const layer = (target: Extract<StoreTarget, { readonly _tag: "DynamoDb" }>) => {
  const names = {
    tableName: target.tableName ?? DynamoDbTable.defaultTableName,
    keyAttribute: target.keyAttribute,
    ttlAttribute: target.ttlAttribute
  }
  const schema = Layer.effect(
    StoreSchema,
    Effect.map(DynamoDbClient.DynamoDbClient, (client) => ({
      migrate: DynamoDbTable.create(names).pipe(
        Effect.provideService(DynamoDbClient.DynamoDbClient, client),
        Effect.map((result): MigrateResult => ({
          store: "DynamoDb",
          applied: true,
          created: result.created,
          detail: `the table ${names.tableName} ${result.created ? "was created" : "exists"}; native TTL is ${
            result.timeToLive === "enabled" ? "enabled" : "not supported by this endpoint"
          }`
        }))
      )
    }))
  )
  return Layer.merge(IdempotencyAdmin.layer.pipe(Layer.provideMerge(DynamoDbStore.layerWith(names))), schema).pipe(
    Layer.provide(
      DynamoDbClient.layer({
        region: target.region,
        ...(target.endpoint === undefined ? {} : { endpoint: target.endpoint })
      })
    )
  )
}
