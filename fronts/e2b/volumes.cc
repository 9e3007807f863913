#include "fronts/e2b/volumes.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "fronts/e2b/access_token.h"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"
#include "fronts/http/upstream.h"

namespace warden::e2b {
namespace {

using nlohmann::json;

constexpr absl::Duration kCallTimeout = absl::Minutes(10);

std::string Rfc3339(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

// E2B's paths are absolute within the volume ("/data/x"); Warden's relative.
std::string Relative(const std::string& path) { return std::string(absl::StripPrefix(path, "/")); }

json EntryJson(const v1::VolumeEntry& e) {
  std::string type = e.type() == "other" ? "unknown" : e.type();
  json out = {{"name", e.path().empty() ? "" : e.name()},
              {"type", type},
              {"path", "/" + e.path()},
              {"size", e.size()},
              {"mode", e.mode()},
              {"uid", e.uid()},
              {"gid", e.gid()},
              {"atime", Rfc3339(e.accessed_unix_ms())},
              {"mtime", Rfc3339(e.modified_unix_ms())},
              {"ctime", Rfc3339(e.changed_unix_ms())}};
  if (e.type() == "symlink") out["target"] = e.symlink_target();
  return out;
}

// ?uid=&gid=&mode= into a request that has them.
template <typename Message>
absl::Status Attributes(const http::Request& request, Message* m) {
  for (const char* key : {"uid", "gid", "mode"}) {
    const std::string text = request.Query(key);
    if (text.empty()) continue;
    uint32_t value = 0;
    if (!absl::SimpleAtoi(text, &value)) {
      return absl::InvalidArgumentError(absl::StrCat(key, " must be a number, not '", text.substr(0, 40), "'"));
    }
    if (std::string(key) == "uid") m->set_uid(value);
    if (std::string(key) == "gid") m->set_gid(value);
    if (std::string(key) == "mode") m->set_mode(value);
  }
  return absl::OkStatus();
}

bool Truthy(const std::string& text) { return text == "true" || text == "1"; }

class VolumeFront {
 public:
  VolumeFront(v1::Volumes::StubInterface* volumes, const E2bOptions& options)
      : volumes_(volumes),
        tokens_(options.access_key.empty() ? AccessTokens::Random() : *AccessTokens::WithKey(options.access_key)) {}

  // ---- control plane

  absl::Status Create(http::Request& request, http::Exchange& exchange) {
    json body = json::parse(request.body(), nullptr, false);
    if (!body.is_object() || !body.contains("name") || !body["name"].is_string()) {
      return absl::InvalidArgumentError("the body must be JSON {\"name\": \"...\"}");
    }
    v1::CreateVolumeRequest create;
    create.set_name(body["name"].get<std::string>());
    v1::Volume volume;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->CreateVolume(Upstream(request.token).get(), create, &volume)));
    return exchange.Send(http::Response::Json(201, WithToken(volume.name(), request.token)));
  }

  absl::Status List(http::Request& request, http::Exchange& exchange) {
    v1::ListVolumesResponse list;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->ListVolumes(Upstream(request.token).get(), {}, &list)));
    json out = json::array();
    for (const v1::Volume& v : list.volumes()) out.push_back({{"volumeID", v.name()}, {"name", v.name()}});
    return exchange.Send(http::Response::Json(200, out));
  }

  absl::Status Get(http::Request& request, http::Exchange& exchange) {
    v1::GetVolumeRequest get;
    get.set_name(request.Param("id"));
    v1::Volume volume;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->GetVolume(Upstream(request.token).get(), get, &volume)));
    return exchange.Send(http::Response::Json(200, WithToken(volume.name(), request.token)));
  }

  absl::Status Delete(http::Request& request, http::Exchange& exchange) {
    v1::DeleteVolumeRequest del;
    del.set_name(request.Param("id"));
    v1::DeleteVolumeResponse deleted;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->DeleteVolume(Upstream(request.token).get(), del, &deleted)));
    http::Response r;
    r.status = 204;
    r.content_type.clear();
    return exchange.Send(std::move(r));
  }

  // ---- content (the volume's token stands for the API key)

  absl::Status ListDir(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    v1::ListVolumeFilesRequest list;
    list.set_volume(request.Param("id"));
    list.set_path(Relative(request.Query("path")));
    int depth = 1;
    if (!request.Query("depth").empty() && !absl::SimpleAtoi(request.Query("depth"), &depth)) {
      return absl::InvalidArgumentError("depth must be a number");
    }
    list.set_depth(depth);
    v1::ListVolumeFilesResponse entries;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->ListVolumeFiles(Upstream(key).get(), list, &entries)));
    json out = json::array();
    for (const v1::VolumeEntry& e : entries.entries()) out.push_back(EntryJson(e));
    return exchange.Send(http::Response::Json(200, out));
  }

  absl::Status MakeDir(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    v1::MakeVolumeDirectoryRequest mkdir;
    mkdir.set_volume(request.Param("id"));
    mkdir.set_path(Relative(request.Query("path")));
    mkdir.set_make_parents(Truthy(request.Query("force")));
    RETURN_IF_ERROR(Attributes(request, &mkdir));
    v1::VolumeEntry entry;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->MakeVolumeDirectory(Upstream(key).get(), mkdir, &entry)));
    return exchange.Send(http::Response::Json(201, EntryJson(entry)));
  }

  absl::Status ReadFile(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    v1::ReadVolumeFileRequest read;
    read.set_volume(request.Param("id"));
    read.set_path(Relative(request.Query("path")));
    auto ctx = Upstream(key);
    auto reader = volumes_->ReadVolumeFile(ctx.get(), read);
    http::Response r;
    r.content_type = "application/octet-stream";
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) r.body += chunk.data();
    RETURN_IF_ERROR(http::FromGrpc(reader->Finish()));
    return exchange.Send(std::move(r));
  }

  absl::Status WriteFile(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    v1::WriteVolumeFileRequest header;
    header.mutable_header()->set_volume(request.Param("id"));
    header.mutable_header()->set_path(Relative(request.Query("path")));
    header.mutable_header()->set_size(static_cast<int64_t>(request.body().size()));
    header.mutable_header()->set_make_parents(true);
    RETURN_IF_ERROR(Attributes(request, header.mutable_header()));
    auto ctx = Upstream(key);
    v1::VolumeEntry entry;
    auto writer = volumes_->WriteVolumeFile(ctx.get(), &entry);
    bool sent = writer->Write(header);
    const std::string& body = request.body();
    for (size_t at = 0; sent && at < body.size(); at += 1 << 20) {
      v1::WriteVolumeFileRequest part;
      part.set_chunk(body.substr(at, 1 << 20));
      sent = writer->Write(part);
    }
    writer->WritesDone();
    RETURN_IF_ERROR(http::FromGrpc(writer->Finish()));
    return exchange.Send(http::Response::Json(201, EntryJson(entry)));
  }

  absl::Status Stat(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    v1::StatVolumePathRequest stat;
    stat.set_volume(request.Param("id"));
    stat.set_path(Relative(request.Query("path")));
    v1::VolumeEntry entry;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->StatVolumePath(Upstream(key).get(), stat, &entry)));
    return exchange.Send(http::Response::Json(200, EntryJson(entry)));
  }

  absl::Status Patch(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    json body = json::parse(request.body().empty() ? "{}" : request.body(), nullptr, false);
    if (!body.is_object()) return absl::InvalidArgumentError("the body must be JSON {uid?, gid?, mode?}");
    v1::SetVolumePathAttributesRequest set;
    set.set_volume(request.Param("id"));
    set.set_path(Relative(request.Query("path")));
    for (const char* k : {"uid", "gid", "mode"}) {
      if (!body.contains(k) || body[k].is_null()) continue;
      if (!body[k].is_number_unsigned()) return absl::InvalidArgumentError(absl::StrCat(k, " must be a number"));
      const uint32_t v = body[k].get<uint32_t>();
      if (std::string(k) == "uid") set.set_uid(v);
      if (std::string(k) == "gid") set.set_gid(v);
      if (std::string(k) == "mode") set.set_mode(v);
    }
    v1::VolumeEntry entry;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->SetVolumePathAttributes(Upstream(key).get(), set, &entry)));
    return exchange.Send(http::Response::Json(200, EntryJson(entry)));
  }

  absl::Status Remove(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(std::string key, KeyOf(request));
    v1::RemoveVolumePathRequest remove;
    remove.set_volume(request.Param("id"));
    remove.set_path(Relative(request.Query("path")));
    v1::RemoveVolumePathResponse removed;
    RETURN_IF_ERROR(http::FromGrpc(volumes_->RemoveVolumePath(Upstream(key).get(), remove, &removed)));
    http::Response r;
    r.status = 204;
    r.content_type.clear();
    return exchange.Send(std::move(r));
  }

 private:
  static std::unique_ptr<grpc::ClientContext> Upstream(const std::string& key) {
    return http::UpstreamContext(key, kCallTimeout);
  }
  json WithToken(const std::string& name, const std::string& api_key) const {
    return {{"volumeID", name}, {"name", name}, {"token", tokens_.Seal(absl::StrCat("volume/", name), api_key)}};
  }
  // The API key the volume's token was made for; the same 401 for a
  // missing, altered or another volume's token.
  absl::StatusOr<std::string> KeyOf(const http::Request& request) const {
    auto key = tokens_.Open(request.token, absl::StrCat("volume/", request.Param("id")));
    if (!key.ok()) {
      return absl::UnauthenticatedError(
          "this needs the volume's token (Authorization: Bearer <token>), as Volume.create or Volume.connect gave it");
    }
    return key;
  }

  v1::Volumes::StubInterface* const volumes_;
  const AccessTokens tokens_;
};

}  // namespace

void AddE2bVolumeRoutes(http::Router& router, v1::Volumes::StubInterface* volumes, E2bOptions options) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "e2b";
  protocol->find_token = [](const http::Request& request) {
    // The control plane takes the API key; the content API the volume's token.
    const std::string key = http::HeaderToken(request, "X-API-KEY");
    return key.empty() ? http::BearerToken(request) : key;
  };
  protocol->cors_request_headers = {"Content-Type", "X-API-KEY", "Authorization", "browser", "lang", "lang_version",
                                    "package_version", "publisher", "sdk_runtime", "system"};
  protocol->render_error = [](unsigned status, const absl::Status& error, const http::Request&) {
    return http::Response::Json(status, {{"code", status}, {"message", std::string(error.message())}});
  };
  auto front = std::make_shared<VolumeFront>(volumes, options);
  auto route = [front](absl::Status (VolumeFront::*method)(http::Request&, http::Exchange&)) {
    return [front, method](http::Request& request, http::Exchange& exchange) {
      return ((*front).*method)(request, exchange);
    };
  };
  http::RouteOptions control;
  control.max_body_bytes = 1 << 20;
  router.Add(protocol, "POST", "/volumes", route(&VolumeFront::Create), control);
  router.Add(protocol, "GET", "/volumes", route(&VolumeFront::List), control);
  router.Add(protocol, "GET", "/volumes/{id}", route(&VolumeFront::Get), control);
  router.Add(protocol, "DELETE", "/volumes/{id}", route(&VolumeFront::Delete), control);
  // The content API's credential is the volume's token, opened by each
  // handler (KeyOf) before it calls warden.v1 with the key inside.
  http::RouteOptions content;
  content.authenticate = false;
  content.max_body_bytes = options.max_body_bytes;
  router.Add(protocol, "GET", "/volumecontent/{id}/dir", route(&VolumeFront::ListDir), content);
  router.Add(protocol, "POST", "/volumecontent/{id}/dir", route(&VolumeFront::MakeDir), content);
  router.Add(protocol, "GET", "/volumecontent/{id}/file", route(&VolumeFront::ReadFile), content);
  router.Add(protocol, "PUT", "/volumecontent/{id}/file", route(&VolumeFront::WriteFile), content);
  router.Add(protocol, "GET", "/volumecontent/{id}/path", route(&VolumeFront::Stat), content);
  router.Add(protocol, "PATCH", "/volumecontent/{id}/path", route(&VolumeFront::Patch), content);
  router.Add(protocol, "DELETE", "/volumecontent/{id}/path", route(&VolumeFront::Remove), content);
  router.Claim(protocol, "/volumes");
  router.Claim(protocol, "/volumecontent");
}

}  // namespace warden::e2b
