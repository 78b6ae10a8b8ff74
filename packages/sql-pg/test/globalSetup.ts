/**
 * One suffix for this run's tables, schemas and `application_name`s, and, when the run ends, the
 * removal of every table, function and schema that carries it from the `TEST_PG_URL` server, so
 * runs against one server neither collide nor pile up.
 */
import * as Pg from "pg"
import type { TestProject } from "vitest/node"

declare module "vitest" {
  export interface ProvidedContext {
    readonly pgRun: string
  }
}

export default function setup(project: TestProject) {
  const run = Math.random().toString(36).slice(2, 10)
  project.provide("pgRun", run)
  return async () => {
    const url = process.env.TEST_PG_URL
    if (url === undefined || url === "") return
    const client = new Pg.Client({ connectionString: url })
    try {
      await client.connect()
      const suffix = `%\\_${run}%`
      const tables = await client.query<{ readonly schema: string; readonly name: string }>(
        `SELECT schemaname AS schema, tablename AS name FROM pg_tables WHERE tablename LIKE $1 OR schemaname LIKE $1`,
        [suffix]
      )
      for (const table of tables.rows) {
        await client.query(`DROP TABLE IF EXISTS "${table.schema}"."${table.name}" CASCADE`)
      }
      const functions = await client.query<{ readonly schema: string; readonly name: string }>(
        `SELECT n.nspname AS schema, p.proname AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE p.proname LIKE $1 OR n.nspname LIKE $1`,
        [suffix]
      )
      for (const fn of functions.rows) await client.query(`DROP FUNCTION IF EXISTS "${fn.schema}"."${fn.name}" CASCADE`)
      const schemas = await client.query<{ readonly name: string }>(
        `SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE $1`,
        [suffix]
      )
      for (const schema of schemas.rows) await client.query(`DROP SCHEMA IF EXISTS "${schema.name}" CASCADE`)
    } finally {
      await client.end().catch(() => undefined)
    }
  }
}
