// @hey-api/openapi-ts's settings for .ci/openapi: the document named by the environment,
// a fetch client, and imports that end in .js, as Node's ES modules need.
export default {
  input: process.env.TASKTABLE_OPENAPI_DOCUMENT,
  output: { path: "client", module: { extension: ".js" } },
  plugins: ["@hey-api/client-fetch"],
};
