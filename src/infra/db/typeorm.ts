/**
 * TypeORM's classes, loaded with `require`. TypeORM is CommonJS; imported from an ES module, Node
 * first scans its index and every file that index re-exports (a few hundred) for their export names,
 * on every start of every process, before one of them runs. Required, it is only loaded. Every module
 * of the service takes TypeORM's values from here (types from 'typeorm' itself, which costs nothing).
 */
import { createRequire } from 'node:module';
import type * as TypeOrm from 'typeorm';

const typeorm = createRequire(import.meta.url)('typeorm') as typeof TypeOrm;

export const { Brackets, DataSource, EntitySchema, QueryFailedError, Table, TableColumn, TableIndex } = typeorm;
export type DataSource = TypeOrm.DataSource;
export type QueryFailedError = TypeOrm.QueryFailedError;
export type EntitySchema<T> = TypeOrm.EntitySchema<T>;
export type Table = TypeOrm.Table;
export type TableColumn = TypeOrm.TableColumn;
export type TableIndex = TypeOrm.TableIndex;
export type Brackets = TypeOrm.Brackets;
