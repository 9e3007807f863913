// Node's own fetch() through the sandbox's egress proxy: Node before 24
// ignores HTTPS_PROXY, so every Node process of a sandbox preloads this
// (NODE_OPTIONS=--require) to make the global dispatcher send fetch's
// requests through $HTTPS_PROXY (http:// ones through $HTTP_PROXY), but for
// the hosts of $NO_PROXY (the sandbox's own loopback), with Debian's undici
// (node-undici, found through NODE_PATH). Without either, nothing changes.
'use strict';
(() => {
  const httpsProxy = process.env.HTTPS_PROXY || process.env.https_proxy;
  const httpProxy = process.env.HTTP_PROXY || process.env.http_proxy || httpsProxy;
  if (!httpsProxy && !httpProxy) return;
  let undici;
  try {
    undici = require('undici');
  } catch {
    return;
  }
  const noProxy = (process.env.NO_PROXY || process.env.no_proxy || '')
    .split(',').map((h) => h.trim().toLowerCase().replace(/^\[|\]$/g, '')).filter(Boolean);
  const direct = (hostname) => {
    const host = hostname.toLowerCase().replace(/^\[|\]$/g, '');
    return noProxy.some((n) => n === '*' || host === n || host.endsWith(n.startsWith('.') ? n : `.${n}`));
  };
  class EnvProxy extends undici.Dispatcher {
    constructor() {
      super();
      this.agent = new undici.Agent();
      this.https = httpsProxy ? new undici.ProxyAgent(httpsProxy) : this.agent;
      this.http = httpProxy ? new undici.ProxyAgent(httpProxy) : this.agent;
    }
    dispatch(opts, handler) {
      const origin = new URL(opts.origin);
      const through = direct(origin.hostname) ? this.agent : origin.protocol === 'https:' ? this.https : this.http;
      return through.dispatch(opts, handler);
    }
    close() {
      return Promise.all([this.agent.close(), this.https.close(), this.http.close()]);
    }
    destroy() {
      return Promise.all([this.agent.destroy(), this.https.destroy(), this.http.destroy()]);
    }
  }
  undici.setGlobalDispatcher(new EnvProxy());
})();
