import type { Contract } from '../contract.js';
import { docsPage, type DocsPage } from '../docs-page.js';
import { AppError } from '../../domain/errors.js';
import type { Handler } from './types.js';

/** The AsyncAPI document could not be read (it ships beside openapi.yaml). */
export class AsyncApiMissingError extends AppError {
  constructor() {
    super('ASYNCAPI_MISSING', 'The AsyncAPI document is missing: asyncapi.yaml ships beside openapi.yaml');
  }
}

/** The documentation page could not be found (it is built by `npm run build`). */
export class DocsNotBuiltError extends AppError {
  constructor() {
    super('DOCS_NOT_BUILT', 'Documentation is not built: run `npm run docs`');
  }
}

export function metaHandlers(
  contract: Contract,
  docs: () => Promise<string | undefined>,
  asyncApi: () => Promise<string | undefined>,
): { getOpenApiYaml: Handler<'getOpenApiYaml'>; getOpenApiJson: Handler<'getOpenApiJson'>; getAsyncApiYaml: Handler<'getAsyncApiYaml'>; getDocs: Handler<'getDocs'> } {
  // Prepared once per page read (`docs` hands back the same string until the file is read again).
  let page: { built: string; served: DocsPage } | undefined;
  return {
    getOpenApiYaml(_req, res) {
      res.status(200).type('application/yaml').send(contract.yaml);
    },
    getOpenApiJson(_req, res) {
      res.status(200).type('application/json').send(contract.json);
    },
    async getAsyncApiYaml(_req, res) {
      const yaml = await asyncApi();
      if (yaml === undefined) throw new AsyncApiMissingError();
      res.status(200).type('application/yaml').send(yaml);
    },
    async getDocs(_req, res) {
      const built = await docs();
      if (built === undefined) throw new DocsNotBuiltError();
      if (page?.built !== built) page = { built, served: docsPage(built) };
      res.status(200).type('text/html').set(page.served.headers).send(page.served.html);
    },
  };
}
