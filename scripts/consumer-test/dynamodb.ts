/**
 * The DynamoDB README's snippet on dynalite (a DynamoDB emulator on a loopback port): the table made
 * with `DynamoDbTable.create`, then the program, twice; the second run is a replay.
 */
import { Idempotency } from "@effect-idempotency/core"
import { DynamoDbTable } from "@effect-idempotency/dynamodb"
import { Effect } from "effect"
import { deepStrictEqual, strictEqual } from "node:assert"
import { startDynamoDb } from "./embedded.mjs"
import { ClientLive, createOrder, program, StoreLive } from "./snippets/dynamodb.js"

const dynamodb = await startDynamoDb()
process.env.AWS_REGION = "us-east-1"
process.env.DYNAMODB_ENDPOINT = dynamodb.endpoint

try {
  await Effect.runPromise(DynamoDbTable.create({ tableName: "idempotency" }).pipe(Effect.provide(ClientLive)))
  const first = await Effect.runPromise(program)
  const again = await Effect.runPromise(program)
  deepStrictEqual(again, first, "the second run returns the recorded order")
  const replay = await Effect.runPromise(
    Idempotency.result(createOrder.run({ key: "3f0c5c9e-client-key", payload: { sku: "A-1", quantity: 2 } })).pipe(
      Effect.provide(StoreLive)
    )
  )
  strictEqual(replay.replayed, true, "a later run is a replay")
  console.log(`dynamodb: ${JSON.stringify(first)} recorded once on dynalite, then replayed`)
} finally {
  await dynamodb.stop()
}
