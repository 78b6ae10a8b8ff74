/**
 * The DynamoDB README's snippet on dynalite (a DynamoDB emulator on a loopback port): the table made
 * with `DynamoDbTable.create`, then the program, twice; the second run is a replay.
 */
import { DynamoDbTable } from "@effect-idempotency/dynamodb"
import { Effect } from "effect"
import { runTwiceThenReplay, startDynamoDb } from "./embedded.mjs"
import { ClientLive, createOrder, program, StoreLive } from "./snippets/dynamodb.js"

const dynamodb = await startDynamoDb()
process.env.AWS_REGION = "us-east-1"
process.env.DYNAMODB_ENDPOINT = dynamodb.endpoint

try {
  await Effect.runPromise(DynamoDbTable.create({ tableName: "idempotency" }).pipe(Effect.provide(ClientLive)))
  const first = await runTwiceThenReplay({ createOrder, program, StoreLive })
  console.log(`dynamodb: ${JSON.stringify(first)} recorded once on dynalite, then replayed`)
} finally {
  await dynamodb.stop()
}
