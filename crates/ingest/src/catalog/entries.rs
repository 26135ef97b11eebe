//! The catalog's vendors, as data: where each publishes its releases and hashes, and which
//! file names are which platform and arch. [`super::CatalogFetcher`] reads them.

use model::{Arch, Platform};

use super::{
    CatalogEntry, ChecksumFiles, JsonFiles, JsonPerTarget, Releases, Sidecar, SidecarFiles, Source,
    rule,
};

use Arch::{Amd64, Arm, Arm64, Universal, X86};
use Platform::{Darwin, Linux, Windows};

/// Every catalog vendor.
pub(crate) static CATALOG: &[CatalogEntry] = &[
    GO,
    NODEJS,
    FIREFOX,
    PUTTY,
    VSCODE,
    KUBECTL,
    TERRAFORM,
    VLC,
    SEVEN_ZIP,
    NOTEPADPP,
    GIT_WINDOWS,
    POWERSHELL,
    WINDOWS_TERMINAL,
    KEEPASSXC,
    DOCKER_COMPOSE,
    OBS_STUDIO,
    GH,
    RCLONE,
    SYNCTHING,
    JQ,
    RIPGREP,
    MINIKUBE,
    RESTIC,
    K9S,
    VELOCIRAPTOR,
    NEOVIM,
    AGE,
    CHAINSAW,
    HAYABUSA,
    VAULT,
    PACKER,
    CONSUL,
    NOMAD,
];

// https://go.dev/dl/?mode=json&include=all: [{version: "go1.23.4", stable, files: [{filename,
// os, arch, version, sha256, size, kind}]}], newest first (golang.org/x/website/internal/dl).
const GO: CatalogEntry = CatalogEntry {
    id: "go",
    vendor: "Go",
    base_url: "https://go.dev",
    files_url: None,
    source: Source::JsonFiles(JsonFiles {
        url: "{base}/dl/?mode=json&include=all",
        version: "version",
        keep_if: Some("stable"),
        files: "files",
        name: "filename",
        sha256: "sha256",
        file_url: "{base}/dl/{name}",
    }),
    rules: &[
        rule("go*.windows-amd64.*", Windows, Amd64),
        rule("go*.windows-386.*", Windows, X86),
        rule("go*.windows-arm64.*", Windows, Arm64),
        rule("go*.linux-amd64.tar.gz", Linux, Amd64),
        rule("go*.linux-arm64.tar.gz", Linux, Arm64),
        rule("go*.linux-386.tar.gz", Linux, X86),
        rule("go*.linux-armv6l.tar.gz", Linux, Arm),
        rule("go*.darwin-amd64.*", Darwin, Amd64),
        rule("go*.darwin-arm64.*", Darwin, Arm64),
    ],
};

// https://nodejs.org/dist/index.json: [{version: "v23.3.0", date, files, lts, security}];
// dist/<version>/SHASUMS256.txt: "<sha256>  node-v23.3.0-win-x64.zip", "... win-x64/node.exe".
const NODEJS: CatalogEntry = CatalogEntry {
    id: "nodejs",
    vendor: "Node.js",
    base_url: "https://nodejs.org",
    files_url: None,
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/dist/index.json",
            version: "version",
            skip_if: None,
        },
        sha256: "{base}/dist/{version}/SHASUMS256.txt",
        sha1: None,
        md5: None,
        file_url: "{base}/dist/{version}/{name}",
    }),
    rules: &[
        rule("node-v*-win-x64.zip", Windows, Amd64),
        rule("node-v*-win-x64.7z", Windows, Amd64),
        rule("node-v*-x64.msi", Windows, Amd64),
        rule("win-x64/node.exe", Windows, Amd64),
        rule("node-v*-win-x86.zip", Windows, X86),
        rule("node-v*-win-x86.7z", Windows, X86),
        rule("node-v*-x86.msi", Windows, X86),
        rule("win-x86/node.exe", Windows, X86),
        rule("node-v*-win-arm64.zip", Windows, Arm64),
        rule("node-v*-win-arm64.7z", Windows, Arm64),
        rule("node-v*-arm64.msi", Windows, Arm64),
        rule("win-arm64/node.exe", Windows, Arm64),
        rule("node-v*-darwin-x64.tar.*", Darwin, Amd64),
        rule("node-v*-darwin-arm64.tar.*", Darwin, Arm64),
        rule("node-v*.pkg", Darwin, Universal),
        rule("node-v*-linux-x64.tar.*", Linux, Amd64),
        rule("node-v*-linux-arm64.tar.*", Linux, Arm64),
        rule("node-v*-linux-armv7l.tar.*", Linux, Arm),
    ],
};

// https://product-details.mozilla.org/1.0/firefox_versions.json: {"LATEST_FIREFOX_VERSION":
// "133.0", "FIREFOX_ESR": "128.5.0esr", ...}; archive.mozilla.org/pub/firefox/releases/<v>/
// SHA256SUMS: "<sha256>  win64/en-US/Firefox Setup 133.0.exe" for every locale and file.
const FIREFOX: CatalogEntry = CatalogEntry {
    id: "firefox",
    vendor: "Mozilla",
    base_url: "https://product-details.mozilla.org",
    files_url: Some("https://archive.mozilla.org"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonFields {
            url: "{base}/1.0/firefox_versions.json",
            fields: &["LATEST_FIREFOX_VERSION"],
        },
        sha256: "{files}/pub/firefox/releases/{version}/SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/pub/firefox/releases/{version}/{name}",
    }),
    rules: &[
        rule("win64/en-US/Firefox Setup *.exe", Windows, Amd64),
        rule("win64/en-US/Firefox Setup *.msi", Windows, Amd64),
        rule("win32/en-US/Firefox Setup *.exe", Windows, X86),
        rule("win32/en-US/Firefox Setup *.msi", Windows, X86),
        rule("win64-aarch64/en-US/Firefox Setup *.exe", Windows, Arm64),
        rule("mac/en-US/Firefox *.dmg", Darwin, Universal),
        rule("mac/en-US/Firefox *.pkg", Darwin, Universal),
        rule("linux-x86_64/en-US/firefox-*.tar.bz2", Linux, Amd64),
        rule("linux-x86_64/en-US/firefox-*.tar.xz", Linux, Amd64),
        rule("linux-i686/en-US/firefox-*.tar.bz2", Linux, X86),
        rule("linux-i686/en-US/firefox-*.tar.xz", Linux, X86),
        rule("linux-aarch64/en-US/firefox-*.tar.xz", Linux, Arm64),
    ],
};

// https://the.earth.li/~sgtatham/putty/latest/{sha256sums,sha1sums,md5sums}:
// "<hex>  w64/putty.exe", "<hex>  w64/putty-64bit-0.83-installer.msi", and lines such as
// "<hex>  w64/putty.exe (installer version)" for files inside the installer (not URLs).
// `latest/` moves; files are recorded under the versioned directory, which does not.
const PUTTY: CatalogEntry = CatalogEntry {
    id: "putty",
    vendor: "PuTTY",
    base_url: "https://the.earth.li/~sgtatham/putty",
    files_url: None,
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::InNames {
            glob: "putty-{version}.tar.gz",
        },
        sha256: "{base}/latest/sha256sums",
        sha1: Some("{base}/latest/sha1sums"),
        md5: Some("{base}/latest/md5sums"),
        file_url: "{base}/{version}/{name}",
    }),
    rules: &[
        rule("w64/*.exe", Windows, Amd64),
        rule("w64/*.msi", Windows, Amd64),
        rule("w32/*.exe", Windows, X86),
        rule("w32/*.msi", Windows, X86),
        rule("wa64/*.exe", Windows, Arm64),
        rule("wa64/*.msi", Windows, Arm64),
        rule("wa32/*.exe", Windows, Arm),
        rule("wa32/*.msi", Windows, Arm),
    ],
};

// https://update.code.visualstudio.com/api/update/<target>/stable/latest: {url, name,
// version (commit), productVersion, hash (SHA-1), timestamp, sha256hash, supportsFastUpdate}.
const VSCODE: CatalogEntry = CatalogEntry {
    id: "vscode",
    vendor: "Microsoft",
    base_url: "https://update.code.visualstudio.com",
    files_url: None,
    source: Source::JsonPerTarget(JsonPerTarget {
        url: "{base}/api/update/{target}/stable/latest",
        targets: &[
            ("win32-x64", Windows, Amd64),
            ("win32-x64-user", Windows, Amd64),
            ("win32-x64-archive", Windows, Amd64),
            ("win32-arm64", Windows, Arm64),
            ("win32-arm64-user", Windows, Arm64),
            ("darwin-universal", Darwin, Universal),
            ("darwin-arm64", Darwin, Arm64),
            ("darwin", Darwin, Amd64),
            ("linux-x64", Linux, Amd64),
            ("linux-deb-x64", Linux, Amd64),
            ("linux-rpm-x64", Linux, Amd64),
            ("linux-arm64", Linux, Arm64),
            ("linux-armhf", Linux, Arm),
        ],
        version: "productVersion",
        file_url: "url",
        sha256: "sha256hash",
        sha1: Some("hash"),
    }),
    rules: &[],
};

// https://dl.k8s.io/release/stable.txt: "v1.31.3"; .../release/<v>/bin/<os>/<arch>/kubectl
// with kubectl.sha256 beside it holding the bare hex digest.
const KUBECTL: CatalogEntry = CatalogEntry {
    id: "kubectl",
    vendor: "Kubernetes",
    base_url: "https://dl.k8s.io",
    files_url: None,
    source: Source::Sidecar(Sidecar {
        releases: Releases::Text {
            url: "{base}/release/stable.txt",
        },
        files: SidecarFiles::Paths(&[
            "{base}/release/{version}/bin/linux/amd64/kubectl",
            "{base}/release/{version}/bin/linux/arm64/kubectl",
            "{base}/release/{version}/bin/linux/arm/kubectl",
            "{base}/release/{version}/bin/linux/386/kubectl",
            "{base}/release/{version}/bin/darwin/amd64/kubectl",
            "{base}/release/{version}/bin/darwin/arm64/kubectl",
            "{base}/release/{version}/bin/windows/amd64/kubectl.exe",
            "{base}/release/{version}/bin/windows/386/kubectl.exe",
            "{base}/release/{version}/bin/windows/arm64/kubectl.exe",
        ]),
    }),
    rules: &[
        rule("*/bin/linux/amd64/kubectl", Linux, Amd64),
        rule("*/bin/linux/arm64/kubectl", Linux, Arm64),
        rule("*/bin/linux/arm/kubectl", Linux, Arm),
        rule("*/bin/linux/386/kubectl", Linux, X86),
        rule("*/bin/darwin/amd64/kubectl", Darwin, Amd64),
        rule("*/bin/darwin/arm64/kubectl", Darwin, Arm64),
        rule("*/bin/windows/amd64/kubectl.exe", Windows, Amd64),
        rule("*/bin/windows/386/kubectl.exe", Windows, X86),
        rule("*/bin/windows/arm64/kubectl.exe", Windows, Arm64),
    ],
};

// https://api.releases.hashicorp.com/v1/releases/terraform: [{version, is_prerelease, builds:
// [{os, arch, url}], url_shasums, ...}]; releases.hashicorp.com/terraform/<v>/
// terraform_<v>_SHA256SUMS: "<sha256>  terraform_<v>_linux_amd64.zip".
const TERRAFORM: CatalogEntry = CatalogEntry {
    id: "terraform",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/terraform?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/terraform/{version}/terraform_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/terraform/{version}/{name}",
    }),
    rules: &[
        rule("terraform_*_windows_amd64.zip", Windows, Amd64),
        rule("terraform_*_windows_386.zip", Windows, X86),
        rule("terraform_*_linux_amd64.zip", Linux, Amd64),
        rule("terraform_*_linux_arm64.zip", Linux, Arm64),
        rule("terraform_*_linux_arm.zip", Linux, Arm),
        rule("terraform_*_linux_386.zip", Linux, X86),
        rule("terraform_*_darwin_amd64.zip", Darwin, Amd64),
        rule("terraform_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// https://get.videolan.org/vlc/last/<dir>/: an autoindex listing of vlc-3.0.21-win64.exe and
// friends, each with a "<sha256>  <name>" file named <name>.sha256 beside it.
const VLC: CatalogEntry = CatalogEntry {
    id: "vlc",
    vendor: "VideoLAN",
    base_url: "https://get.videolan.org",
    files_url: None,
    source: Source::Sidecar(Sidecar {
        releases: Releases::InNames {
            glob: "vlc-{version}-*",
        },
        files: SidecarFiles::Listing(&[
            "{base}/vlc/last/win64/",
            "{base}/vlc/last/win32/",
            "{base}/vlc/last/macosx/",
        ]),
    }),
    rules: &[
        rule("vlc-{version}-win64.exe", Windows, Amd64),
        rule("vlc-{version}-win64.msi", Windows, Amd64),
        rule("vlc-{version}-win64.zip", Windows, Amd64),
        rule("vlc-{version}-win64.7z", Windows, Amd64),
        rule("vlc-{version}-win32.exe", Windows, X86),
        rule("vlc-{version}-win32.msi", Windows, X86),
        rule("vlc-{version}-win32.zip", Windows, X86),
        rule("vlc-{version}-win32.7z", Windows, X86),
        rule("vlc-{version}-universal.dmg", Darwin, Universal),
        rule("vlc-{version}-arm64.dmg", Darwin, Arm64),
        rule("vlc-{version}-intel64.dmg", Darwin, Amd64),
    ],
};

// GitHub releases of ip7z/7zip: tag "24.09", assets 7z2409-x64.exe, 7z2409.exe (x86),
// 7z2409-arm64.exe, 7z2409-x64.msi, 7z2409-linux-x64.tar.xz, 7z2409-mac.tar.xz, 7zr.exe...
const SEVEN_ZIP: CatalogEntry = CatalogEntry {
    id: "7zip",
    vendor: "7-Zip",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases { repo: "ip7z/7zip" },
    rules: &[
        rule("7z*-x64.exe", Windows, Amd64),
        rule("7z*-x64.msi", Windows, Amd64),
        rule("7z*-arm64.exe", Windows, Arm64),
        rule("7z{version}.exe", Windows, X86),
        rule("7z{version}.msi", Windows, X86),
        rule("7zr.exe", Windows, X86),
        rule("7z*-linux-x64.tar.xz", Linux, Amd64),
        rule("7z*-linux-arm64.tar.xz", Linux, Arm64),
        rule("7z*-linux-x86.tar.xz", Linux, X86),
        rule("7z*-linux-arm.tar.xz", Linux, Arm),
        rule("7z*-mac.tar.xz", Darwin, Universal),
    ],
};

// GitHub releases of notepad-plus-plus/notepad-plus-plus: tag "v8.7.7", assets
// npp.8.7.7.Installer.x64.exe, npp.8.7.7.Installer.exe (x86), npp.8.7.7.portable.x64.zip...
const NOTEPADPP: CatalogEntry = CatalogEntry {
    id: "notepadpp",
    vendor: "Notepad++",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "notepad-plus-plus/notepad-plus-plus",
    },
    rules: &[
        rule("npp.*.Installer.x64.exe", Windows, Amd64),
        rule("npp.*.Installer.x64.msi", Windows, Amd64),
        rule("npp.*.portable.x64.zip", Windows, Amd64),
        rule("npp.*.portable.x64.7z", Windows, Amd64),
        rule("npp.*.Installer.arm64.exe", Windows, Arm64),
        rule("npp.*.portable.arm64.zip", Windows, Arm64),
        rule("npp.*.portable.arm64.7z", Windows, Arm64),
        rule("npp.{version}.Installer.exe", Windows, X86),
        rule("npp.{version}.portable.zip", Windows, X86),
        rule("npp.{version}.portable.7z", Windows, X86),
    ],
};

// https://api.github.com/repos/git-for-windows/git/releases: GitHub release assets with `digest`.
const GIT_WINDOWS: CatalogEntry = CatalogEntry {
    id: "git-windows",
    vendor: "Git for Windows",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "git-for-windows/git",
    },
    rules: &[
        rule("Git-*-64-bit.exe", Windows, Amd64),
        rule("Git-*-arm64.exe", Windows, Arm64),
        rule("MinGit-*-64-bit.zip", Windows, Amd64),
        rule("MinGit-*-arm64.zip", Windows, Arm64),
        rule("PortableGit-*-64-bit.7z.exe", Windows, Amd64),
    ],
};

// https://api.github.com/repos/PowerShell/PowerShell/releases: GitHub release assets with `digest`.
const POWERSHELL: CatalogEntry = CatalogEntry {
    id: "powershell",
    vendor: "Microsoft PowerShell",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "PowerShell/PowerShell",
    },
    rules: &[
        rule("PowerShell-*-win-x64.msi", Windows, Amd64),
        rule("PowerShell-*-win-x64.zip", Windows, Amd64),
        rule("PowerShell-*-win-arm64.zip", Windows, Arm64),
        rule("powershell-*-linux-x64.tar.gz", Linux, Amd64),
        rule("powershell-*-linux-arm64.tar.gz", Linux, Arm64),
        rule("powershell-*-osx-arm64.pkg", Darwin, Arm64),
        rule("powershell-*-osx-x64.pkg", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/microsoft/terminal/releases: GitHub release assets with `digest`.
const WINDOWS_TERMINAL: CatalogEntry = CatalogEntry {
    id: "windows-terminal",
    vendor: "Microsoft Windows Terminal",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "microsoft/terminal",
    },
    rules: &[
        rule(
            "Microsoft.WindowsTerminal_*_8wekyb3d8bbwe.msixbundle",
            Windows,
            Universal,
        ),
        rule("Microsoft.WindowsTerminal_*_x64.zip", Windows, Amd64),
        rule("Microsoft.WindowsTerminal_*_arm64.zip", Windows, Arm64),
        rule("Microsoft.WindowsTerminal_*_x86.zip", Windows, X86),
    ],
};

// https://api.github.com/repos/keepassxreboot/keepassxc/releases: GitHub release assets with `digest`.
const KEEPASSXC: CatalogEntry = CatalogEntry {
    id: "keepassxc",
    vendor: "KeePassXC",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "keepassxreboot/keepassxc",
    },
    rules: &[
        rule("KeePassXC-*-Win64.msi", Windows, Amd64),
        rule("KeePassXC-*-Win64.zip", Windows, Amd64),
        rule("KeePassXC-*-x86_64.AppImage", Linux, Amd64),
        rule("KeePassXC-*-arm64.dmg", Darwin, Arm64),
        rule("KeePassXC-*-x86_64.dmg", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/docker/compose/releases: GitHub release assets with `digest`.
const DOCKER_COMPOSE: CatalogEntry = CatalogEntry {
    id: "docker-compose",
    vendor: "Docker",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "docker/compose",
    },
    rules: &[
        rule("docker-compose-windows-x86_64.exe", Windows, Amd64),
        rule("docker-compose-windows-aarch64.exe", Windows, Arm64),
        rule("docker-compose-linux-x86_64", Linux, Amd64),
        rule("docker-compose-linux-aarch64", Linux, Arm64),
        rule("docker-compose-darwin-x86_64", Darwin, Amd64),
        rule("docker-compose-darwin-aarch64", Darwin, Arm64),
    ],
};

// https://api.github.com/repos/obsproject/obs-studio/releases: GitHub release assets with `digest`.
const OBS_STUDIO: CatalogEntry = CatalogEntry {
    id: "obs-studio",
    vendor: "OBS Project",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "obsproject/obs-studio",
    },
    rules: &[
        rule("OBS-Studio-*-Windows-Installer.exe", Windows, Amd64),
        rule("OBS-Studio-*-Windows.zip", Windows, Amd64),
        rule("OBS-Studio-*-macOS-Apple.dmg", Darwin, Arm64),
        rule("OBS-Studio-*-macOS-Intel.dmg", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/cli/cli/releases: GitHub release assets with `digest`.
const GH: CatalogEntry = CatalogEntry {
    id: "gh",
    vendor: "GitHub CLI",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases { repo: "cli/cli" },
    rules: &[
        rule("gh_*_windows_amd64.msi", Windows, Amd64),
        rule("gh_*_windows_amd64.zip", Windows, Amd64),
        rule("gh_*_windows_arm64.zip", Windows, Arm64),
        rule("gh_*_linux_amd64.tar.gz", Linux, Amd64),
        rule("gh_*_linux_arm64.tar.gz", Linux, Arm64),
        rule("gh_*_macOS_arm64.zip", Darwin, Arm64),
        rule("gh_*_macOS_amd64.zip", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/rclone/rclone/releases: GitHub release assets with `digest`.
const RCLONE: CatalogEntry = CatalogEntry {
    id: "rclone",
    vendor: "Rclone",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "rclone/rclone",
    },
    rules: &[
        rule("rclone-v*-windows-amd64.zip", Windows, Amd64),
        rule("rclone-v*-windows-arm64.zip", Windows, Arm64),
        rule("rclone-v*-linux-amd64.zip", Linux, Amd64),
        rule("rclone-v*-linux-arm64.zip", Linux, Arm64),
        rule("rclone-v*-osx-arm64.zip", Darwin, Arm64),
        rule("rclone-v*-osx-amd64.zip", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/syncthing/syncthing/releases: GitHub release assets with `digest`.
const SYNCTHING: CatalogEntry = CatalogEntry {
    id: "syncthing",
    vendor: "Syncthing",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "syncthing/syncthing",
    },
    rules: &[
        rule("syncthing-windows-amd64-v*.zip", Windows, Amd64),
        rule("syncthing-windows-arm64-v*.zip", Windows, Arm64),
        rule("syncthing-linux-amd64-v*.tar.gz", Linux, Amd64),
        rule("syncthing-linux-arm64-v*.tar.gz", Linux, Arm64),
        rule("syncthing-macos-universal-v*.zip", Darwin, Universal),
    ],
};

// https://api.github.com/repos/jqlang/jq/releases: GitHub release assets with `digest`.
const JQ: CatalogEntry = CatalogEntry {
    id: "jq",
    vendor: "jq",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases { repo: "jqlang/jq" },
    rules: &[
        rule("jq-windows-amd64.exe", Windows, Amd64),
        rule("jq-linux-amd64", Linux, Amd64),
        rule("jq-linux-arm64", Linux, Arm64),
        rule("jq-macos-arm64", Darwin, Arm64),
        rule("jq-macos-amd64", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/BurntSushi/ripgrep/releases: GitHub release assets with `digest`.
const RIPGREP: CatalogEntry = CatalogEntry {
    id: "ripgrep",
    vendor: "ripgrep",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "BurntSushi/ripgrep",
    },
    rules: &[
        rule("ripgrep-*-x86_64-pc-windows-msvc.zip", Windows, Amd64),
        rule("ripgrep-*-aarch64-pc-windows-msvc.zip", Windows, Arm64),
        rule("ripgrep-*-x86_64-unknown-linux-musl.tar.gz", Linux, Amd64),
        rule("ripgrep-*-aarch64-unknown-linux-gnu.tar.gz", Linux, Arm64),
        rule("ripgrep-*-aarch64-apple-darwin.tar.gz", Darwin, Arm64),
        rule("ripgrep-*-x86_64-apple-darwin.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/kubernetes/minikube/releases: GitHub release assets with `digest`.
const MINIKUBE: CatalogEntry = CatalogEntry {
    id: "minikube",
    vendor: "Kubernetes minikube",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "kubernetes/minikube",
    },
    rules: &[
        rule("minikube-installer.exe", Windows, Amd64),
        rule("minikube-windows-amd64.exe", Windows, Amd64),
        rule("minikube-linux-amd64", Linux, Amd64),
        rule("minikube-linux-arm64", Linux, Arm64),
        rule("minikube-darwin-arm64", Darwin, Arm64),
        rule("minikube-darwin-amd64", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/restic/restic/releases: GitHub release assets with `digest`.
const RESTIC: CatalogEntry = CatalogEntry {
    id: "restic",
    vendor: "restic",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "restic/restic",
    },
    rules: &[
        rule("restic_*_windows_amd64.zip", Windows, Amd64),
        rule("restic_*_windows_386.zip", Windows, X86),
        rule("restic_*_linux_amd64.bz2", Linux, Amd64),
        rule("restic_*_linux_arm64.bz2", Linux, Arm64),
        rule("restic_*_darwin_arm64.bz2", Darwin, Arm64),
        rule("restic_*_darwin_amd64.bz2", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/derailed/k9s/releases: GitHub release assets with `digest`.
const K9S: CatalogEntry = CatalogEntry {
    id: "k9s",
    vendor: "k9s",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "derailed/k9s",
    },
    rules: &[
        rule("k9s_Windows_amd64.zip", Windows, Amd64),
        rule("k9s_Windows_arm64.zip", Windows, Arm64),
        rule("k9s_Linux_amd64.tar.gz", Linux, Amd64),
        rule("k9s_Linux_arm64.tar.gz", Linux, Arm64),
        rule("k9s_Darwin_arm64.tar.gz", Darwin, Arm64),
        rule("k9s_Darwin_amd64.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/Velocidex/velociraptor/releases: GitHub release assets with `digest`.
const VELOCIRAPTOR: CatalogEntry = CatalogEntry {
    id: "velociraptor",
    vendor: "Velocidex",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "Velocidex/velociraptor",
    },
    rules: &[
        rule("velociraptor-v*-windows-amd64.exe", Windows, Amd64),
        rule("velociraptor-v*-windows-amd64.msi", Windows, Amd64),
        rule("velociraptor-v*-windows-386.exe", Windows, X86),
        rule("velociraptor-v*-linux-amd64", Linux, Amd64),
        rule("velociraptor-v*-linux-arm64", Linux, Arm64),
        rule("velociraptor-v*-darwin-arm64", Darwin, Arm64),
        rule("velociraptor-v*-darwin-amd64", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/neovim/neovim/releases: GitHub release assets with `digest`.
const NEOVIM: CatalogEntry = CatalogEntry {
    id: "neovim",
    vendor: "Neovim",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "neovim/neovim",
    },
    rules: &[
        rule("nvim-win64.msi", Windows, Amd64),
        rule("nvim-win64.zip", Windows, Amd64),
        rule("nvim-linux64.tar.gz", Linux, Amd64),
        rule("nvim-linux-x86_64.tar.gz", Linux, Amd64),
        rule("nvim-linux-arm64.tar.gz", Linux, Arm64),
        rule("nvim-macos-arm64.tar.gz", Darwin, Arm64),
        rule("nvim-macos-x86_64.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/FiloSottile/age/releases: GitHub release assets with `digest`.
const AGE: CatalogEntry = CatalogEntry {
    id: "age",
    vendor: "age",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "FiloSottile/age",
    },
    rules: &[
        rule("age-v*-windows-amd64.zip", Windows, Amd64),
        rule("age-v*-linux-amd64.tar.gz", Linux, Amd64),
        rule("age-v*-linux-arm64.tar.gz", Linux, Arm64),
        rule("age-v*-darwin-arm64.tar.gz", Darwin, Arm64),
        rule("age-v*-darwin-amd64.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/WithSecureLabs/chainsaw/releases: GitHub release assets with `digest`.
const CHAINSAW: CatalogEntry = CatalogEntry {
    id: "chainsaw",
    vendor: "WithSecure",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "WithSecureLabs/chainsaw",
    },
    rules: &[
        rule("chainsaw_x86_64-pc-windows-msvc.zip", Windows, Amd64),
        rule("chainsaw_x86_64-unknown-linux-gnu.tar.gz", Linux, Amd64),
        rule("chainsaw_aarch64-apple-darwin.tar.gz", Darwin, Arm64),
        rule("chainsaw_x86_64-apple-darwin.tar.gz", Darwin, Amd64),
    ],
};

// https://api.github.com/repos/Yamato-Security/hayabusa/releases: GitHub release assets with `digest`.
const HAYABUSA: CatalogEntry = CatalogEntry {
    id: "hayabusa",
    vendor: "Yamato Security",
    base_url: "https://api.github.com",
    files_url: None,
    source: Source::GithubReleases {
        repo: "Yamato-Security/hayabusa",
    },
    rules: &[
        rule("hayabusa-*-win-x64.zip", Windows, Amd64),
        rule("hayabusa-*-win-aarch64.zip", Windows, Arm64),
        rule("hayabusa-*-lin-x64-gnu.zip", Linux, Amd64),
        rule("hayabusa-*-lin-aarch64-gnu.zip", Linux, Arm64),
        rule("hayabusa-*-mac-arm.zip", Darwin, Arm64),
        rule("hayabusa-*-mac-intel.zip", Darwin, Amd64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/vault, then vault_<v>_SHA256SUMS.
const VAULT: CatalogEntry = CatalogEntry {
    id: "vault",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/vault?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/vault/{version}/vault_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/vault/{version}/{name}",
    }),
    rules: &[
        rule("vault_*_windows_amd64.zip", Windows, Amd64),
        rule("vault_*_windows_386.zip", Windows, X86),
        rule("vault_*_linux_amd64.zip", Linux, Amd64),
        rule("vault_*_linux_arm64.zip", Linux, Arm64),
        rule("vault_*_linux_arm.zip", Linux, Arm),
        rule("vault_*_darwin_amd64.zip", Darwin, Amd64),
        rule("vault_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/packer, then packer_<v>_SHA256SUMS.
const PACKER: CatalogEntry = CatalogEntry {
    id: "packer",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/packer?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/packer/{version}/packer_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/packer/{version}/{name}",
    }),
    rules: &[
        rule("packer_*_windows_amd64.zip", Windows, Amd64),
        rule("packer_*_windows_386.zip", Windows, X86),
        rule("packer_*_linux_amd64.zip", Linux, Amd64),
        rule("packer_*_linux_arm64.zip", Linux, Arm64),
        rule("packer_*_linux_arm.zip", Linux, Arm),
        rule("packer_*_darwin_amd64.zip", Darwin, Amd64),
        rule("packer_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/consul, then consul_<v>_SHA256SUMS.
const CONSUL: CatalogEntry = CatalogEntry {
    id: "consul",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/consul?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/consul/{version}/consul_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/consul/{version}/{name}",
    }),
    rules: &[
        rule("consul_*_windows_amd64.zip", Windows, Amd64),
        rule("consul_*_windows_386.zip", Windows, X86),
        rule("consul_*_linux_amd64.zip", Linux, Amd64),
        rule("consul_*_linux_arm64.zip", Linux, Arm64),
        rule("consul_*_linux_arm.zip", Linux, Arm),
        rule("consul_*_darwin_amd64.zip", Darwin, Amd64),
        rule("consul_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};

// Like Terraform: api.releases.hashicorp.com/v1/releases/nomad, then nomad_<v>_SHA256SUMS.
const NOMAD: CatalogEntry = CatalogEntry {
    id: "nomad",
    vendor: "HashiCorp",
    base_url: "https://api.releases.hashicorp.com",
    files_url: Some("https://releases.hashicorp.com"),
    source: Source::ChecksumFiles(ChecksumFiles {
        releases: Releases::JsonArray {
            url: "{base}/v1/releases/nomad?limit=20",
            version: "version",
            skip_if: Some("is_prerelease"),
        },
        sha256: "{files}/nomad/{version}/nomad_{version}_SHA256SUMS",
        sha1: None,
        md5: None,
        file_url: "{files}/nomad/{version}/{name}",
    }),
    rules: &[
        rule("nomad_*_windows_amd64.zip", Windows, Amd64),
        rule("nomad_*_windows_386.zip", Windows, X86),
        rule("nomad_*_linux_amd64.zip", Linux, Amd64),
        rule("nomad_*_linux_arm64.zip", Linux, Arm64),
        rule("nomad_*_linux_arm.zip", Linux, Arm),
        rule("nomad_*_darwin_amd64.zip", Darwin, Amd64),
        rule("nomad_*_darwin_arm64.zip", Darwin, Arm64),
    ],
};
