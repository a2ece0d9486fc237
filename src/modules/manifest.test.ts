import { describe, expect, it } from 'vitest';
import { PortRegistry, type ModuleManifest, type Ports } from './manifest.ts';

// Ports are typed by augmentation; the tests use a made-up port name through a cast.
type Probe = { ping(n: number): number };
const name = 'probe' as keyof Ports;
const manifest = (m: Partial<ModuleManifest>): ModuleManifest => ({ name: 'm', entities: [], create: () => ({}), ...m });

describe('PortRegistry', () => {
  it('a required port forwards to the provider registered after it was handed out', () => {
    const ports = new PortRegistry();
    const probe = ports.resolverFor('consumer', [name])(name) as unknown as Probe;
    ports.provide('provider', { [name]: { base: 10, ping(this: { base: number }, n: number) { return this.base + n; } } } as never);
    expect(probe.ping(1)).toBe(11);
    expect(probe.ping(2)).toBe(12);
  });

  it('fails at verify when a required port has no provider, and on use of an undeclared port', () => {
    const ports = new PortRegistry();
    expect(() => ports.verify([manifest({ name: 'consumer', requires: [name] })])).toThrow(/requires port probe/);
    expect(() => ports.resolverFor('consumer', [])(name)).toThrow(/without declaring/);
    expect(() => ports.resolverFor('consumer', []).optional(name)).toThrow(/without declaring/);
  });

  it('a port is provided once', () => {
    const ports = new PortRegistry();
    ports.provide('a', { [name]: {} } as never);
    expect(() => ports.provide('b', { [name]: {} } as never)).toThrow(/provided twice/);
  });

  it('an optional port is undefined until some module provides it', () => {
    const ports = new PortRegistry();
    const probe = ports.resolverFor('consumer', [], [name]).optional(name) as unknown as () => Probe | undefined;
    expect(probe()).toBeUndefined();
    ports.verify([manifest({ name: 'consumer', optional: [name] })]);
    ports.provide('provider', { [name]: { ping: (n: number) => n * 2 } } as never);
    expect(probe()?.ping(4)).toBe(8);
  });
});
