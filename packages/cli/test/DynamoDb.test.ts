/**
 * The CLI on DynamoDB: DynamoDB Local when Java is found (required in CI), else dynalite.
 */
import { DynamoDbStore } from "@effect-idempotency/dynamodb"
import * as Layer from "effect/Layer"
import { backends, clientLayer, uniqueTableName } from "../../dynamodb/test/utils/backends.js"
import { CliStore, scenario } from "./utils/scenario.js"

const backend = backends[0]!
const tableName = uniqueTableName("cli")

scenario(`effect-idempotency on ${backend.name}`, {
  layer: Layer.mergeAll(
    DynamoDbStore.layerWith({ tableName }).pipe(Layer.provide(clientLayer(backend))),
    Layer.succeed(CliStore, {
      args: ["--store", `dynamodb://${tableName}?region=us-east-1&endpoint=${encodeURIComponent(backend.endpoint)}`],
      // DynamoDB Local keeps one database per access key and region: the tests' client's
      env: { AWS_ACCESS_KEY_ID: "local", AWS_SECRET_ACCESS_KEY: "local" }
    })
  ),
  migrated: { applied: true }
})
