/* global process */
/**
 * The embedded servers the runners use, in JavaScript: PGlite (PostgreSQL in WASM) served for the
 * `pg` driver, and dynalite (a DynamoDB emulator), both on loopback ports. Kept out of the
 * type-check: their own declarations are not what the consumer test checks.
 */
import { PGlite } from "@electric-sql/pglite"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import dynalite from "dynalite"

/** Starts PGlite on a loopback port; `url` is a connection string for it. */
export const startPostgres = async () => {
  const db = await PGlite.create()
  const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0, maxConnections: 20 })
  await server.start()
  return {
    url: `postgres://postgres@${server.getServerConn()}/postgres`,
    stop: async () => {
      await server.stop()
      await db.close()
    }
  }
}

/** Starts dynalite on a loopback port, with credentials for the SDK's default chain in the environment. */
export const startDynamoDb = async () => {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve))
  // an emulator accepts any credentials
  process.env.AWS_ACCESS_KEY_ID ??= "local"
  process.env.AWS_SECRET_ACCESS_KEY ??= "local"
  return {
    endpoint: `http://127.0.0.1:${server.address().port}`,
    stop: () => new Promise((resolve) => server.close(() => resolve(undefined)))
  }
}
