#include "fronts/jupyter/kernel_gateway_http.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"

namespace warden::jupyter {
namespace {

http::Response ToResponse(const Reply& reply) {
  http::Response r;
  r.status = static_cast<unsigned>(reply.status);
  if (!reply.body.is_null()) r.body = DumpJson(reply.body);
  for (const auto& [name, value] : reply.headers) r.With(name, value);
  return r;
}

Caller CallerOf(const http::Request& request) {
  return Caller{request.token.empty() ? "" : absl::StrCat("Bearer ", request.token)};
}

// GET /api/kernels/{kernel_id}/channels: the WebSocket. Once upgraded it is
// served by the HTTP server's I/O threads and the channel's lanes; this
// handler's thread returns at once.
absl::Status ServeChannels(KernelGateway& gateway, http::Request& request, http::Exchange& exchange) {
  if (!exchange.IsWebSocketUpgrade()) {
    return exchange.Send(ToResponse(ErrorReply(
        400, "/api/kernels/{kernel_id}/channels is a WebSocket: connect with a WebSocket client (ws://)")));
  }
  const Caller caller = CallerOf(request);
  const std::string kernel_id = request.Param("kernel_id");
  // An unknown kernel is refused before the upgrade, with a 404 a client can read.
  if (Reply found = gateway.GetKernel(caller, kernel_id); found.status != 200) {
    return exchange.Send(ToResponse(found));
  }
  absl::StatusOr<std::shared_ptr<http::WebSocket>> socket =
      exchange.AcceptWebSocket({std::string(kV1Subprotocol)});
  if (!socket.ok()) return socket.status();
  std::shared_ptr<http::WebSocket> ws = *std::move(socket);
  const WireFormat format = ws->subprotocol() == kV1Subprotocol ? WireFormat::kV1 : WireFormat::kJson;
  // The socket keeps itself alive while open; the channel only reaches it.
  std::weak_ptr<http::WebSocket> weak = ws;
  ChannelSink sink{
      [weak](std::string frame, bool binary) {
        if (std::shared_ptr<http::WebSocket> s = weak.lock()) (void)s->Send({std::move(frame), binary});
      },
      [weak] {
        if (std::shared_ptr<http::WebSocket> s = weak.lock()) s->Close();
      },
  };
  Reply error;
  std::shared_ptr<KernelChannel> channel = gateway.Connect(caller, kernel_id, format, std::move(sink), &error);
  if (channel == nullptr) {  // the kernel went away between the check and now
    ws->Start([](http::WebSocket::Message) {});
    ws->Close();
    return absl::OkStatus();
  }
  ws->Start([channel](http::WebSocket::Message m) { channel->OnFrame(m.data); },
            [channel](absl::Status) { channel->Close(); });
  return absl::OkStatus();  // the exchange was answered by the upgrade; a broken socket is the client's business
}

}  // namespace

void AddKernelGatewayRoutes(http::Router& router, std::shared_ptr<KernelGateway> gateway) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "jupyter";
  protocol->find_token = http::JupyterToken;
  // What @jupyterlab/services sends from a browser, and reads.
  protocol->cors_request_headers = {"Authorization", "Content-Type", "X-XSRFToken"};
  protocol->cors_expose_headers = {"Location"};
  protocol->render_error = [](unsigned status, const absl::Status& error, const http::Request&) {
    std::string message(error.message());
    if (status == 401) {
      message = absl::StrCat(message, "; send the Warden token as \"Authorization: token TOKEN\" or ?token=TOKEN");
    }
    return ToResponse(ErrorReply(static_cast<int>(status), std::move(message)));
  };

  using Handler = std::function<Reply(KernelGateway&, const Caller&, const http::Request&)>;
  auto rest = [&router, &protocol, gateway](const char* method, const char* pattern, Handler handler,
                                            http::RouteOptions options = {}) {
    router.Add(protocol, method, pattern,
               [gateway, handler = std::move(handler)](http::Request& request, http::Exchange& exchange) {
                 return exchange.Send(ToResponse(handler(*gateway, CallerOf(request), request)));
               },
               options);
  };
  // The server's info and the kernel specs are constants: answered on the
  // I/O thread, without a hop to the handler pool (clients poll /api to
  // see whether the gateway is up).
  http::RouteOptions constant;
  constant.nonblocking = true;
  rest("GET", "/api", [](KernelGateway& g, const Caller&, const http::Request&) { return g.ApiInfo(); }, constant);
  rest("GET", "/api/kernelspecs",
       [](KernelGateway& g, const Caller&, const http::Request&) { return g.ListKernelSpecs(); }, constant);
  rest("GET", "/api/kernels",
       [](KernelGateway& g, const Caller& c, const http::Request&) { return g.ListKernels(c); });
  http::RouteOptions bounded;
  bounded.max_body_bytes = KernelGateway::kMaxBodyBytes;
  rest("POST", "/api/kernels",
       [](KernelGateway& g, const Caller& c, const http::Request& r) { return g.StartKernel(c, r.body()); },
       bounded);
  rest("GET", "/api/kernels/{kernel_id}", [](KernelGateway& g, const Caller& c, const http::Request& r) {
    return g.GetKernel(c, r.Param("kernel_id"));
  });
  rest("DELETE", "/api/kernels/{kernel_id}", [](KernelGateway& g, const Caller& c, const http::Request& r) {
    return g.ShutdownKernel(c, r.Param("kernel_id"));
  });
  rest("POST", "/api/kernels/{kernel_id}/interrupt", [](KernelGateway& g, const Caller& c, const http::Request& r) {
    return g.InterruptKernel(c, r.Param("kernel_id"));
  }, bounded);
  rest("POST", "/api/kernels/{kernel_id}/restart", [](KernelGateway& g, const Caller& c, const http::Request& r) {
    return g.RestartKernel(c, r.Param("kernel_id"));
  }, bounded);
  router.Add(protocol, "GET", "/api/kernels/{kernel_id}/channels",
             [gateway](http::Request& request, http::Exchange& exchange) {
               return ServeChannels(*gateway, request, exchange);
             });
  router.Claim(protocol, "/api");
}

}  // namespace warden::jupyter
