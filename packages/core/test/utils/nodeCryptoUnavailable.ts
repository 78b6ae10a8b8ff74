/**
 * What `node:crypto` resolves to in the core's test project: a module that throws when
 * loaded, as on a runtime without Node's built-in modules.
 */
throw new Error("node:crypto is unavailable in this test run")
