//! Several real `knowngood serve` processes on loopback, as a deployment runs them: one
//! PostgreSQL (a fresh schema of `KNOWNGOOD_TEST_POSTGRES_URL`, or a private instance this
//! test stops and starts), one private Redis, one shared corpus directory, the same
//! secrets. What one replica does, the others see: shared rate limits, key revocations and
//! settings changes within a second, corpus generations (a corrupt one refused by all),
//! TOTP codes used once in the whole cluster, one runner per job interval, and the job carried on by the others after SIGKILL. And
//! what a replica does when its database goes away: fast 503s, `/readyz` 503, recovery
//! without a restart; a replica killed mid-request loses no acknowledged write.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::db::{Backend, Scratch};

const BIN: &str = env!("CARGO_BIN_EXE_knowngood");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn skipped(name: &str, why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED {name}: {why}");
}

/// Child processes killed (SIGKILL) when the test ends, however it ends.
#[derive(Default)]
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A private redis-server on a free port, without persistence.
fn start_redis(children: &mut Children) -> Option<u16> {
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    children.0.push(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(port)
}

/// One replica's addresses and files.
struct Replica {
    api: String,
    metrics: String,
    log: PathBuf,
    index: usize,
}

/// What every replica and every CLI run of the deployment shares.
struct Deployment {
    dir: PathBuf,
    database_url: String,
    redis_url: Option<String>,
    corpus_dir: PathBuf,
    config: PathBuf,
}

impl Deployment {
    fn new(dir: &Path, database_url: String, redis_url: Option<String>, config: &str) -> Self {
        let config_path = dir.join("knowngood.toml");
        std::fs::write(&config_path, config).unwrap();
        let corpus_dir = dir.join("shared-corpus");
        std::fs::create_dir_all(&corpus_dir).unwrap();
        Deployment {
            dir: dir.to_path_buf(),
            database_url,
            redis_url,
            corpus_dir,
            config: config_path,
        }
    }

    fn data_dir(&self, index: usize) -> PathBuf {
        self.dir.join(format!("data-{index}"))
    }

    fn command(&self, index: usize) -> Command {
        let mut c = Command::new(BIN);
        c.env("KNOWNGOOD_DATA_DIR", self.data_dir(index))
            .env("KNOWNGOOD_DATABASE_URL", &self.database_url)
            .env("KNOWNGOOD_CONFIG", &self.config)
            .env("KNOWNGOOD_CORPUS_DIR", &self.corpus_dir)
            .env_remove("KNOWNGOOD_METRICS_LISTEN")
            .env_remove("KNOWNGOOD_LISTEN");
        match &self.redis_url {
            Some(url) => c.env("KNOWNGOOD_REDIS_URL", url),
            None => c.env_remove("KNOWNGOOD_REDIS_URL"),
        };
        c
    }

    /// Runs a CLI command as replica 0 would; its stdout's last line.
    fn cli(&self, args: &[&str]) -> String {
        let out = self
            .command(0)
            .args(args)
            .env("RUST_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "knowngood {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// The platform owner key, and the secrets (generated into replica 0's data dir) given
    /// to the other replicas too: keys and tokens made by one must pass on all.
    fn bootstrap(&self, replicas: usize) -> String {
        let owner = self.cli(&["admin", "bootstrap"]);
        for i in 1..replicas {
            let data = self.data_dir(i);
            std::fs::create_dir_all(&data).unwrap();
            let ok = Command::new("cp")
                .arg("-a")
                .arg(self.data_dir(0).join("secrets"))
                .arg(&data)
                .status()
                .unwrap();
            assert!(ok.success());
            std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .unwrap();
        }
        owner
    }

    fn spawn(&self, index: usize, children: &mut Children) -> (Replica, usize) {
        let (api, metrics) = (free_port(), free_port());
        let log = self.dir.join(format!("replica-{index}.log"));
        let child = self
            .command(index)
            .arg("serve")
            .env("KNOWNGOOD_LISTEN", format!("127.0.0.1:{api}"))
            .env("KNOWNGOOD_METRICS_LISTEN", format!("127.0.0.1:{metrics}"))
            .env("KNOWNGOOD_LOG_FORMAT", "json")
            .env("RUST_LOG", "info,server::request_log=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        children.0.push(child);
        (
            Replica {
                api: format!("http://127.0.0.1:{api}"),
                metrics: format!("http://127.0.0.1:{metrics}/metrics"),
                log,
                index,
            },
            children.0.len() - 1,
        )
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn wait_ready(client: &reqwest::Client, r: &Replica, children: &mut Children, slot: usize) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(resp) = client.get(format!("{}/readyz", r.api)).send().await
            && resp.status() == 200
        {
            return;
        }
        if let Some(exit) = children.0[slot].try_wait().unwrap() {
            panic!(
                "replica {} exited ({exit}): {}",
                r.index,
                std::fs::read_to_string(&r.log).unwrap_or_default()
            );
        }
        assert!(Instant::now() < deadline, "replica {} never ready", r.index);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sum of the samples of a metric family whose line starts with `prefix`.
async fn metric(client: &reqwest::Client, r: &Replica, prefix: &str) -> f64 {
    let text = client
        .get(&r.metrics)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn send(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client.request(method, url).header("X-API-Key", key);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get(client: &reqwest::Client, url: String, key: &str) -> u16 {
    send(client, reqwest::Method::GET, url, key, None).await.0
}

async fn corpus_generation(client: &reqwest::Client, r: &Replica) -> Option<String> {
    let status: Value = client
        .get(format!("{}/public/status", r.api))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["components"]["reference_corpus"]["generation"]
        .as_str()
        .map(str::to_owned)
}

/// Polls until `done` holds on every replica; how long after `since` the last one did.
async fn seen_everywhere<'a, F, Fut>(
    replicas: &'a [&'a Replica],
    since: Instant,
    mut done: F,
) -> Duration
where
    F: FnMut(&'a Replica) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut last = Duration::ZERO;
    for r in replicas {
        loop {
            if done(r).await {
                last = last.max(since.elapsed());
                break;
            }
            assert!(
                since.elapsed() < Duration::from_secs(10),
                "replica {} never saw it",
                r.index
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    last
}

/// An RDS v3 database with one file, whose SHA-256 is derived from `seed`.
fn rds(path: &Path, seed: u8) {
    let h = |len: usize| hex::encode(vec![seed; len]);
    corpus::synth::write_rows(
        path,
        corpus::Layout::Minimal,
        &[corpus::synth::FileRow {
            sha256: h(32),
            sha1: h(20),
            md5: h(16),
            file_name: format!("file-{seed}.dll"),
            file_size: 1024,
            package_id: 1,
        }],
        &[corpus::synth::Package {
            package_id: 1,
            name: "Windows".into(),
            version: "11".into(),
        }],
    )
    .unwrap();
}

/// A copy of generation `from` as the next generation, one data byte flipped (its
/// manifest checksum no longer matches), named by `CURRENT`.
fn publish_corrupt_generation(root: &Path, from: &str) -> String {
    let seq: u64 = from.trim_start_matches("gen-").parse().unwrap();
    let name = format!("gen-{:08}", seq + 1);
    let (src, dst) = (root.join(from), root.join(&name));
    std::fs::create_dir(&dst).unwrap();
    let mut flipped = false;
    let mut files: Vec<_> = std::fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let mut bytes = std::fs::read(&path).unwrap();
        if file == "manifest.json" {
            let mut manifest: Value = serde_json::from_slice(&bytes).unwrap();
            manifest["generation"] = json!(name);
            bytes = serde_json::to_vec(&manifest).unwrap();
        } else if !flipped && !file.ends_with(".buckets") && !bytes.is_empty() {
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            flipped = true;
        }
        std::fs::write(dst.join(&file), bytes).unwrap();
    }
    assert!(flipped, "no data file to corrupt");
    let tmp = root.join(".tmp-CURRENT");
    std::fs::write(&tmp, format!("{name}\n")).unwrap();
    std::fs::rename(&tmp, root.join("CURRENT")).unwrap();
    name
}

const REPLICAS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_share_limits_revocations_settings_corpus_and_jobs() {
    let Some(scratch) = Scratch::new(Backend::Postgres, "replicas").await else {
        return;
    };
    let mut children = Children::default();
    let Some(redis_port) = start_redis(&mut children) else {
        skipped("replicas", "redis-server is not installed");
        return;
    };
    let database_url = scratch.new_url().await;
    let tmp = tempfile::tempdir().unwrap();
    // Quick turns for the test: jobs are looked at every second, the revocation check
    // (nothing to check: it runs and ends at once) has two-second intervals.
    let deployment = Deployment::new(
        tmp.path(),
        database_url.clone(),
        Some(format!("redis://127.0.0.1:{redis_port}/")),
        "[schedule]\ndaily_refresh = \"off\"\njobs_check_secs = 1\n\
         [revocation]\ncheck_secs = 2\n[database]\nacquire_timeout_ms = 2000\n",
    );
    let owner = deployment.bootstrap(REPLICAS);
    let analyst = deployment.cli(&[
        "admin",
        "create-account",
        "--team",
        "acme",
        "--tier",
        "basic",
        "--role",
        "analyst",
    ]);
    let team_admin = deployment.cli(&[
        "admin",
        "create-account",
        "--team",
        "beta",
        "--tier",
        "teams",
        "--role",
        "account_admin",
    ]);
    // Its own account: the writes interrupted by SIGKILL below spend its minute's budget.
    let writer_key = deployment.cli(&[
        "admin",
        "create-account",
        "--team",
        "gamma",
        "--tier",
        "teams",
        "--role",
        "account_admin",
    ]);
    // A first generation in the shared corpus directory before the replicas start.
    let rds1 = tmp.path().join("rds-1.db");
    rds(&rds1, 0x11);
    deployment.cli(&["nsrl", "import", rds1.to_str().unwrap()]);

    let mut replicas = Vec::new();
    let mut slots = Vec::new();
    for i in 0..REPLICAS {
        let (r, slot) = deployment.spawn(i, &mut children);
        replicas.push(r);
        slots.push(slot);
    }
    let client = http();
    for (r, slot) in replicas.iter().zip(&slots) {
        wait_ready(&client, r, &mut children, *slot).await;
    }
    let all: Vec<&Replica> = replicas.iter().collect();
    let first_generation = corpus_generation(&client, &replicas[0]).await.unwrap();
    for r in &all {
        assert_eq!(
            corpus_generation(&client, r).await.as_deref(),
            Some(first_generation.as_str())
        );
    }

    // Shared limits: 60 requests a minute per key, counted in Redis. A burst of 90 spread
    // over the three replicas gets 60 answers (plus one per second the burst lasted:
    // the limit refills at one a second); per-replica counting would answer all 90.
    let started = Instant::now();
    let burst = (0..90).map(|i| {
        let (client, url, key) = (
            client.clone(),
            format!("{}/api/v1/intel/stats", replicas[i % REPLICAS].api),
            analyst.clone(),
        );
        async move { get(&client, url, &key).await }
    });
    let statuses = futures_join_all(burst).await;
    let mut elapsed = started.elapsed();
    // And the 61st on each replica once the 60 are spent.
    let mut after = Vec::new();
    for r in &all {
        after.push(get(&client, format!("{}/api/v1/intel/stats", r.api), &analyst).await);
    }
    elapsed = elapsed.max(started.elapsed());
    let ok = statuses.iter().chain(&after).filter(|s| **s == 200).count();
    let refused = statuses.iter().chain(&after).filter(|s| **s == 429).count();
    assert_eq!(ok + refused, 93, "{statuses:?} {after:?}");
    let refill = elapsed.as_secs() as usize + 1;
    assert!(
        (60..=60 + refill).contains(&ok),
        "{ok} answered in {elapsed:?} across replicas: {statuses:?}"
    );
    if elapsed < Duration::from_secs(1) {
        assert_eq!(after, vec![429; REPLICAS], "61st request on each replica");
    }
    for r in &all {
        assert_eq!(
            metric(&client, r, "knowngood_rate_limit_fallbacks_total").await,
            0.0,
            "replica {} counted on its own",
            r.index
        );
    }
    eprintln!("shared limit: {ok} of 93 answered across {REPLICAS} replicas in {elapsed:?}");

    // Revocation: a key revoked through replica 0 is refused by 1 and 2 within a second.
    let (status, created) = send(
        &client,
        reqwest::Method::POST,
        format!("{}/api/v1/admin/keys", replicas[1].api),
        &team_admin,
        Some(json!({"role": "analyst", "label": "to revoke"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let (doomed_id, doomed) = (
        created["key_id"].as_str().unwrap().to_owned(),
        created["key"].as_str().unwrap().to_owned(),
    );
    for r in &all {
        // Cached on every replica from here on.
        assert_eq!(
            get(&client, format!("{}/api/v1/intel/stats", r.api), &doomed).await,
            200
        );
    }
    let (status, body) = send(
        &client,
        reqwest::Method::DELETE,
        format!("{}/api/v1/admin/keys/{doomed_id}", replicas[0].api),
        &team_admin,
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    let revoked_at = Instant::now();
    let took = seen_everywhere(&all[1..], revoked_at, |r| {
        let (client, doomed) = (client.clone(), doomed.clone());
        async move { get(&client, format!("{}/api/v1/intel/stats", r.api), &doomed).await == 401 }
    })
    .await;
    assert!(
        took <= Duration::from_secs(1),
        "revocation reached every replica after {took:?}"
    );
    eprintln!("revocation seen everywhere after {took:?}");

    // Settings: a limit changed through replica 1 is in force on 0 and 2 within a second.
    let (status, body) = send(
        &client,
        reqwest::Method::PATCH,
        format!("{}/api/v1/admin/settings", replicas[1].api),
        &owner,
        Some(json!({"limits": {"token_per_key": 2}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let changed_at = Instant::now();
    let others = [all[0], all[2]];
    let took = seen_everywhere(&others, changed_at, |r| {
        let (client, owner) = (client.clone(), owner.clone());
        async move {
            let (status, body) = send(
                &client,
                reqwest::Method::GET,
                format!("{}/api/v1/admin/settings", r.api),
                &owner,
                None,
            )
            .await;
            status == 200 && body["limits"]["token_per_key"] == json!(2)
        }
    })
    .await;
    assert!(
        took <= Duration::from_secs(1),
        "settings reached every replica after {took:?}"
    );
    eprintln!("settings change seen everywhere after {took:?}");
    // In force: the third token of a minute is refused, on another replica than the
    // one that took the change.
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let (status, _) = send(
            &client,
            reqwest::Method::POST,
            format!("{}/api/v1/auth/token", replicas[2].api),
            &team_admin,
            None,
        )
        .await;
        tokens.push(status);
    }
    assert_eq!(tokens, vec![200, 200, 429]);

    // A new generation published to the shared directory is live on every replica within
    // a second of its CURRENT switch.
    let rds2 = tmp.path().join("rds-2.db");
    rds(&rds2, 0x22);
    deployment.cli(&["nsrl", "import", rds2.to_str().unwrap()]);
    let switched_at = Instant::now();
    let second_generation = std::fs::read_to_string(deployment.corpus_dir.join("CURRENT"))
        .unwrap()
        .trim()
        .to_string();
    assert_ne!(second_generation, first_generation);
    let took = seen_everywhere(&all, switched_at, |r| {
        let (client, want) = (client.clone(), second_generation.clone());
        async move { corpus_generation(&client, r).await.as_deref() == Some(want.as_str()) }
    })
    .await;
    assert!(
        took <= Duration::from_secs(1),
        "the generation reached every replica after {took:?}"
    );
    eprintln!("corpus generation switch seen everywhere after {took:?}");

    // A generation whose data does not match its manifest's checksums is refused by
    // every replica, which keep the one they have.
    let corrupt = publish_corrupt_generation(&deployment.corpus_dir, &second_generation);
    let published_at = Instant::now();
    seen_everywhere(&all, published_at, |r| {
        let client = client.clone();
        async move { metric(&client, r, "knowngood_reference_corpus_refused").await == 1.0 }
    })
    .await;
    for r in &all {
        assert_eq!(
            corpus_generation(&client, r).await.as_deref(),
            Some(second_generation.as_str()),
            "replica {} must not map {corrupt}",
            r.index
        );
        let log = std::fs::read_to_string(&r.log).unwrap();
        assert!(
            log.contains("checksum mismatch"),
            "replica {}: {log}",
            r.index
        );
    }

    // One runner per job: each two-second interval of the revocation check is leased by
    // one replica, which runs it once. Runs counted by all replicas never exceed the
    // intervals leased.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let leased = || async {
        testkit::db::scalar(
            Backend::Postgres,
            &database_url,
            "SELECT COUNT(*) FROM job_leases WHERE job LIKE 'revocation.check:%'",
        )
        .await
    };
    let mut per_replica = Vec::new();
    for r in &all {
        per_replica.push(
            metric(
                &client,
                r,
                "knowngood_job_runs_total{job=\"revocation.check\"",
            )
            .await as i64,
        );
    }
    let ended: i64 = per_replica.iter().sum();
    let taken = leased().await;
    assert!(ended >= 3, "the check hardly ran: {per_replica:?}");
    assert!(
        ended <= taken && taken <= ended + 2,
        "{ended} runs ended ({per_replica:?}) for {taken} leased intervals"
    );

    // TOTP replay protection is the cluster's: a code accepted on one replica is refused
    // on every other within its 30-second step.
    let (status, enrolment) = send(
        &client,
        reqwest::Method::POST,
        format!("{}/api/v1/admin/mfa/totp/enroll", replicas[0].api),
        &team_admin,
        None,
    )
    .await;
    assert_eq!(status, 200, "{enrolment}");
    let seed = testkit::fixtures::base32_decode(enrolment["secret"].as_str().unwrap());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let code = auth::mfa::totp_at(&seed, now);
    let (status, body) = send(
        &client,
        reqwest::Method::POST,
        format!("{}/api/v1/admin/mfa/totp/verify", replicas[1].api),
        &team_admin,
        Some(json!({"code": code})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for r in [&replicas[2], &replicas[0]] {
        let (status, body) = send(
            &client,
            reqwest::Method::POST,
            format!("{}/api/v1/admin/auth/totp", r.api),
            &team_admin,
            Some(json!({"code": code})),
        )
        .await;
        assert_eq!(
            status, 401,
            "replica {} took a replayed code: {body}",
            r.index
        );
    }

    // SIGKILL of a replica that ran the job, in the middle of writes it acknowledges: every
    // acknowledged write is there afterwards, and the others carry on with the job.
    let victim = (0..REPLICAS).max_by_key(|i| per_replica[*i]).unwrap();
    let survivor = &replicas[(victim + 1) % REPLICAS];
    let writer = {
        let (client, url, key) = (
            client.clone(),
            format!("{}/api/v1/admin/keys", replicas[victim].api),
            writer_key.clone(),
        );
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in 0.. {
                let sent = client
                    .post(&url)
                    .header("X-API-Key", &key)
                    .json(&json!({"role": "analyst", "label": format!("write {i}")}))
                    .send()
                    .await;
                let Ok(resp) = sent else { break };
                if resp.status() != 201 {
                    break;
                }
                let Ok(body) = resp.json::<Value>().await else {
                    break;
                };
                acknowledged.push(body["key_id"].as_str().unwrap().to_owned());
            }
            acknowledged
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    children.0[slots[victim]].kill().unwrap();
    let killed_at = Instant::now();
    children.0[slots[victim]].wait().unwrap();
    let acknowledged = writer.await.unwrap();
    assert!(
        !acknowledged.is_empty(),
        "no write acknowledged before the kill"
    );
    let (status, keys) = send(
        &client,
        reqwest::Method::GET,
        format!("{}/api/v1/admin/keys", survivor.api),
        &writer_key,
        None,
    )
    .await;
    assert_eq!(status, 200, "{keys}");
    let listed: Vec<&str> = keys["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["key_id"].as_str())
        .collect();
    for id in &acknowledged {
        assert!(
            listed.contains(&id.as_str()),
            "acknowledged key {id} lost with the replica"
        );
    }
    eprintln!(
        "{} acknowledged writes before SIGKILL, all present",
        acknowledged.len()
    );

    let before = leased().await;
    let survivors: Vec<&Replica> = all.iter().copied().filter(|r| r.index != victim).collect();
    let mut survivor_runs = 0;
    for r in &survivors {
        survivor_runs += metric(
            &client,
            r,
            "knowngood_job_runs_total{job=\"revocation.check\"",
        )
        .await as i64;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after_kill = leased().await;
    let mut survivor_runs_after = 0;
    for r in &survivors {
        survivor_runs_after += metric(
            &client,
            r,
            "knowngood_job_runs_total{job=\"revocation.check\"",
        )
        .await as i64;
    }
    assert!(
        after_kill >= before + 2 && survivor_runs_after >= survivor_runs + 2,
        "after the kill ({:?} ago): {before} -> {after_kill} intervals leased, survivors ran {survivor_runs} -> {survivor_runs_after}",
        killed_at.elapsed()
    );

    drop(children);
    scratch.cleanup().await;
}

/// Runs futures concurrently on the test's runtime; their outputs in order.
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

/// A private PostgreSQL cluster (initdb in a temporary directory, run as the `postgres`
/// user) this test may stop and start.
struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    fn create(dir: &Path) -> Option<PrivatePostgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| Some(e.ok()?.path().join("bin")))
            .filter(|b| b.join("initdb").is_file())
            .max()?;
        let home = dir.join("pg");
        std::fs::create_dir_all(&home).ok()?;
        let owned = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&home)
            .status()
            .ok()?;
        if !owned.success() {
            return None;
        }
        // The temporary directory must be traversable by the postgres user.
        let _ = std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755));
        let pg = PrivatePostgres {
            bin,
            data: home.join("data"),
            port: free_port(),
        };
        let out = pg
            .as_postgres(&pg.bin.join("initdb"))
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "-D"])
            .arg(&pg.data)
            .output()
            .ok()?;
        if !out.status.success() {
            skipped(
                "database_outage",
                &format!("initdb failed: {}", String::from_utf8_lossy(&out.stderr)),
            );
            return None;
        }
        Some(pg)
    }

    fn as_postgres(&self, program: &Path) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        if let Some(home) = self.data.parent() {
            c.current_dir(home);
        }
        c.stdout(Stdio::null());
        c
    }

    fn start(&self) {
        let ok = self
            .as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .arg("-o")
            .arg(format!(
                "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=on",
                self.port,
                self.data.display()
            ))
            .args(["-w", "-t", "60", "-l"])
            .arg(self.data.join("server.log"))
            .arg("start")
            .status()
            .unwrap();
        assert!(ok.success(), "pg_ctl start");
    }

    fn stop(&self) {
        let ok = self
            .as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-w", "-t", "60", "-m", "fast", "stop"])
            .status()
            .unwrap();
        assert!(ok.success(), "pg_ctl stop");
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self
            .as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "stop"])
            .stderr(Stdio::null())
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_outage_gives_fast_503s_and_recovers_without_restart() {
    if std::env::var(testkit::db::PG_ENV).is_err() {
        skipped(
            "database_outage",
            "set KNOWNGOOD_TEST_POSTGRES_URL to run the PostgreSQL suites",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(pg) = PrivatePostgres::create(tmp.path()) else {
        skipped(
            "database_outage",
            "no PostgreSQL server binaries to run a private instance",
        );
        return;
    };
    pg.start();
    let mut children = Children::default();
    let deployment = Deployment::new(
        tmp.path(),
        pg.url(),
        None,
        // The load below would spend a minute's 60 requests in no time.
        "[schedule]\ndaily_refresh = \"off\"\n[database]\nacquire_timeout_ms = 1000\n\
         [limits]\nauthenticated_per_key = 1000000\n",
    );
    deployment.bootstrap(1);
    let admin = deployment.cli(&[
        "admin",
        "create-account",
        "--team",
        "acme",
        "--tier",
        "teams",
        "--role",
        "account_admin",
    ]);
    let (replica, slot) = deployment.spawn(0, &mut children);
    let client = http();
    wait_ready(&client, &replica, &mut children, slot).await;
    let issue = |request_id: &'static str| {
        client
            .post(format!("{}/api/v1/admin/keys", replica.api))
            .header("X-API-Key", &admin)
            .header("X-Request-Id", request_id)
            .json(&json!({"role": "analyst"}))
            .send()
    };
    let first = issue("before-outage").await.unwrap();
    assert_eq!(first.status(), 201, "{}", first.text().await.unwrap());

    // Load while the database goes away and comes back: four clients listing keys (a
    // database read each time) without pause, every answer timed.
    let stop_load = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (client, url, key, stop) = (
                client.clone(),
                format!("{}/api/v1/admin/keys", replica.api),
                admin.clone(),
                stop_load.clone(),
            );
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sent_at = Instant::now();
                    let status = get(&client, url.clone(), &key).await;
                    seen.push((status, sent_at.elapsed()));
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;

    pg.stop();
    let stopped_at = Instant::now();
    // Requests that need the database fail within the configured timeout (1 s), with a
    // clear JSON error, and carry their request id.
    for i in 0..3 {
        let sent_at = Instant::now();
        let resp = issue(["outage-1", "outage-2", "outage-3"][i])
            .await
            .unwrap();
        let took = sent_at.elapsed();
        assert_eq!(resp.status(), 503);
        assert_eq!(
            resp.headers()["x-request-id"],
            ["outage-1", "outage-2", "outage-3"][i]
        );
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"], "service unavailable", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("database"),
            "{body}"
        );
        assert!(took < Duration::from_secs(3), "503 after {took:?}");
        eprintln!("database down: 503 after {took:?}");
    }
    let ready = client
        .get(format!("{}/readyz", replica.api))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    let ready: Value = ready.json().await.unwrap();
    assert_eq!(ready["database"], "unreachable");
    assert_eq!(
        metric(&client, &replica, "knowngood_database_up").await,
        0.0
    );
    assert!(metric(&client, &replica, "knowngood_database_unavailable_total").await >= 3.0);
    // The process lives on; the failures are logged as JSON lines naming the request.
    assert!(
        children.0[slot].try_wait().unwrap().is_none(),
        "serve exited"
    );
    let log = std::fs::read_to_string(&replica.log).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("outage-1") && l.contains("request failed"))
        .unwrap_or_else(|| panic!("no log line for the failed request: {log}"));
    let line: Value = serde_json::from_str(line).unwrap();
    assert_eq!(line["span"]["id"], "outage-1", "{line}");
    assert!(
        ["503", "\"503\""].contains(&line["span"]["status"].to_string().as_str()),
        "{line}"
    );
    assert!(!log.contains("panicked"), "{log}");
    eprintln!("outage noticed and answered for {:?}", stopped_at.elapsed());

    // The database returns: ready again and writing, without a restart.
    pg.start();
    let back_at = Instant::now();
    loop {
        let resp = client
            .get(format!("{}/readyz", replica.api))
            .send()
            .await
            .unwrap();
        if resp.status() == 200 {
            break;
        }
        assert!(
            back_at.elapsed() < Duration::from_secs(30),
            "never ready again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = issue("after-outage").await.unwrap();
    assert_eq!(again.status(), 201, "{}", again.text().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop_load.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut answers = Vec::new();
    for worker in load {
        let seen = worker.await.unwrap();
        // Each client is answered again once the database is back.
        assert_eq!(seen.last().map(|(s, _)| *s), Some(200), "{seen:?}");
        answers.extend(seen);
    }
    let slowest = answers.iter().map(|(_, took)| *took).max().unwrap();
    let count = |want: u16| answers.iter().filter(|(s, _)| *s == want).count();
    assert_eq!(
        count(200) + count(503),
        answers.len(),
        "only answers or 503s under load: {:?}\n{}",
        answers.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        std::fs::read_to_string(&replica.log)
            .unwrap()
            .lines()
            .filter(|l| l.contains("ERROR"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        count(503) > 0 && count(200) > 0,
        "{} ok, {} unavailable",
        count(200),
        count(503)
    );
    assert!(
        slowest < Duration::from_secs(3),
        "an answer took {slowest:?}"
    );
    eprintln!(
        "under load: {} answered, {} unavailable, slowest {slowest:?}",
        count(200),
        count(503)
    );
    assert!(
        children.0[slot].try_wait().unwrap().is_none(),
        "serve restarted"
    );
    eprintln!(
        "ready again {:?} after the database returned",
        back_at.elapsed()
    );
}
