// The 3D view (three.js): the arm drawn from its kinematic tree as simple shapes — a grey rod
// between consecutive joint frames, a coloured cylinder along each joint's axis — posed by the
// forward kinematics of the measured state, a TCP marker, and a draggable Cartesian target
// (TransformControls), and the collision model (collision-meshes.ts) when there is one. Rendering
// is on demand: a frame is drawn when something changed.
import * as THREE from "three";
import { OrbitControls } from "three/examples/jsm/controls/OrbitControls.js";
import { TransformControls } from "three/examples/jsm/controls/TransformControls.js";
import type { CollisionModel } from "./collision";
import { type CollisionDrawn, CollisionMeshes } from "./collision-meshes";
import type { KinematicModel, Transform, Vec3 } from "./kinematics";

THREE.Object3D.DEFAULT_UP.set(0, 0, 1); // robot frames are z-up (three.js defaults to y-up)

const ROD_RADIUS = 0.02; // m: scaled down for small arms (see `scale`)
const JOINT_COLOURS = { revolute: 0x2f7fd8, prismatic: 0xd88a2f } as const;

export interface TargetPose {
  position: Vec3;
  orientation: [number, number, number, number]; // [w, x, y, z]
}

function toVector(v: readonly number[]): THREE.Vector3 {
  return new THREE.Vector3(v[0], v[1], v[2]);
}

function toQuaternion(q: readonly number[]): THREE.Quaternion {
  return new THREE.Quaternion(q[1], q[2], q[3], q[0]); // three.js: (x, y, z, w)
}

/** The arm's meshes for one model: a group per link, rods between frames, the TCP marker. */
class ArmMeshes {
  readonly root = new THREE.Group();
  private readonly frames = new Map<string, THREE.Group>();
  private readonly rods: { from: string; to: string; mesh: THREE.Mesh }[] = [];

  constructor(
    readonly model: KinematicModel,
    readonly toolLink: string,
    readonly scale: number,
  ) {
    const rodMaterial = new THREE.MeshStandardMaterial({ color: 0x9aa4b1, metalness: 0.2, roughness: 0.6 });
    const rodGeometry = new THREE.CylinderGeometry(ROD_RADIUS * scale, ROD_RADIUS * scale, 1, 16);
    for (const link of model.links) {
      const frame = new THREE.Group();
      frame.name = link.name;
      this.frames.set(link.name, frame);
      this.root.add(frame);
      if (link.axis && link.kind !== "constant") {
        const joint = new THREE.Mesh(
          new THREE.CylinderGeometry(2 * ROD_RADIUS * scale, 2 * ROD_RADIUS * scale, 5 * ROD_RADIUS * scale, 24),
          new THREE.MeshStandardMaterial({ color: JOINT_COLOURS[link.kind], roughness: 0.5 }),
        );
        joint.quaternion.setFromUnitVectors(new THREE.Vector3(0, 1, 0), toVector(link.axis));
        frame.add(joint);
      }
      if (link.parent !== null) {
        const rod = new THREE.Mesh(rodGeometry, rodMaterial);
        this.rods.push({ from: link.parent, to: link.name, mesh: rod });
        this.root.add(rod);
      }
    }
    const tool = this.frames.get(toolLink);
    if (tool) {
      const marker = new THREE.Mesh(
        new THREE.SphereGeometry(1.5 * ROD_RADIUS * scale, 16, 12),
        new THREE.MeshStandardMaterial({ color: 0xe0c020, emissive: 0x403000 }),
      );
      tool.add(marker, new THREE.AxesHelper(0.1 * scale));
    }
  }

  update(poses: Map<string, Transform>): void {
    for (const [name, pose] of poses) {
      const frame = this.frames.get(name);
      frame?.position.copy(toVector(pose.t));
      frame?.quaternion.copy(toQuaternion(pose.q));
    }
    const up = new THREE.Vector3(0, 1, 0);
    for (const { from, to, mesh } of this.rods) {
      const a = this.frames.get(from)?.position as THREE.Vector3;
      const b = this.frames.get(to)?.position as THREE.Vector3;
      const length = a.distanceTo(b);
      mesh.visible = length > 1e-4;
      if (!mesh.visible) continue;
      mesh.position.copy(a).add(b).multiplyScalar(0.5);
      mesh.quaternion.setFromUnitVectors(up, b.clone().sub(a).normalize());
      mesh.scale.set(1, length, 1);
    }
  }

  dispose(): void {
    this.root.traverse((object) => {
      if (object instanceof THREE.Mesh) {
        object.geometry.dispose();
        (object.material as THREE.Material).dispose();
      }
    });
  }
}

/** The canvas's WebGL 2 context (what three.js draws with), or an Error saying why there is
 * none. Asked here rather than by three.js, which reports a failure as console errors: a browser
 * without WebGL gets the page without its 3D view, and a clean console. */
function webgl2(canvas: HTMLCanvasElement): WebGL2RenderingContext {
  let reason = "";
  const failed = (event: Event): void => {
    reason = (event as WebGLContextEvent).statusMessage.trim();
  };
  canvas.addEventListener("webglcontextcreationerror", failed);
  // preserveDrawingBuffer: the canvas can be read back (screenshots, the browser test).
  const context = canvas.getContext("webgl2", {
    alpha: false,
    antialias: true,
    depth: true,
    stencil: false,
    preserveDrawingBuffer: true,
  });
  canvas.removeEventListener("webglcontextcreationerror", failed);
  if (context === null) {
    throw new Error(`this browser has no WebGL 2${reason ? ` (${reason})` : ""}`);
  }
  return context;
}

export class ArmView {
  readonly canvas: HTMLCanvasElement;
  /** Called when the target is dragged (with its new pose), once a frame shows an arm, and after
   * every frame with what it drew of the collision model (null: the arm has none). */
  onTargetMoved: (pose: TargetPose) => void = () => {};
  onArmDrawn: () => void = () => {};
  onCollisionDrawn: (drawn: CollisionDrawn | null) => void = () => {};
  private readonly renderer: THREE.WebGLRenderer;
  private readonly scene = new THREE.Scene();
  private readonly camera = new THREE.PerspectiveCamera(45, 1, 0.01, 100);
  private readonly orbit: OrbitControls;
  private readonly gizmo: TransformControls;
  private readonly target = new THREE.Group();
  private arm: ArmMeshes | null = null;
  private collision: CollisionMeshes | null = null;
  private collisionShown = false;
  private highlighted: readonly string[] = [];
  private pending = false;
  private armDrawn = false;

  constructor(container: HTMLElement) {
    this.canvas = document.createElement("canvas");
    const context = webgl2(this.canvas);
    this.renderer = new THREE.WebGLRenderer({ canvas: this.canvas, context });
    this.renderer.setPixelRatio(window.devicePixelRatio);
    container.append(this.canvas);
    this.scene.background = new THREE.Color(0x1d232b);
    this.camera.up.set(0, 0, 1);
    this.camera.position.set(1.2, -1.4, 0.9);
    this.scene.add(new THREE.HemisphereLight(0xffffff, 0x303040, 2.0));
    const sun = new THREE.DirectionalLight(0xffffff, 1.5);
    sun.position.set(2, -3, 4);
    this.scene.add(sun);
    const grid = new THREE.GridHelper(2, 20, 0x56606c, 0x38414b);
    grid.rotation.x = Math.PI / 2; // GridHelper lies in XZ; the floor is XY
    this.scene.add(grid, new THREE.AxesHelper(0.2));

    this.orbit = new OrbitControls(this.camera, this.canvas);
    this.orbit.target.set(0, 0, 0.3);
    this.orbit.addEventListener("change", () => this.requestRender());

    const marker = new THREE.Mesh(
      new THREE.SphereGeometry(0.04, 16, 12),
      new THREE.MeshBasicMaterial({ color: 0xff40ff }),
    );
    this.target.add(marker, new THREE.AxesHelper(0.12));
    this.target.visible = false;
    this.scene.add(this.target);
    this.gizmo = new TransformControls(this.camera, this.canvas);
    this.gizmo.setSize(0.8);
    this.gizmo.addEventListener("dragging-changed", (event) => {
      this.orbit.enabled = !event.value;
    });
    this.gizmo.addEventListener("objectChange", () => this.onTargetMoved(this.targetPose()));
    this.gizmo.addEventListener("change", () => this.requestRender());
    this.scene.add(this.gizmo.getHelper());

    new ResizeObserver(() => this.resize(container)).observe(container);
    this.resize(container);
  }

  /** Draw a new arm (null: none) and its collision model (null: none), framed by the camera. */
  setModel(model: KinematicModel | null, toolLink = "", collision: CollisionModel | null = null): void {
    if (this.arm) {
      this.scene.remove(this.arm.root);
      this.arm.dispose();
      this.arm = null;
    }
    if (this.collision) {
      this.scene.remove(this.collision.root);
      this.collision.dispose();
      this.collision = null;
    }
    this.armDrawn = false;
    if (model) {
      const reach = this.reach(model);
      const rest = model.fkAll({});
      this.arm = new ArmMeshes(model, toolLink, Math.max(0.25, Math.min(1, reach)));
      this.arm.update(rest);
      this.scene.add(this.arm.root);
      if (collision) {
        this.collision = new CollisionMeshes(collision, reach);
        this.collision.update(rest);
        this.collision.setShown(this.collisionShown);
        this.collision.setHighlighted(this.highlighted);
        this.scene.add(this.collision.root);
      }
      this.orbit.target.set(0, 0, reach * 0.4);
      this.camera.position.set(1.6 * reach, -1.9 * reach, 1.2 * reach);
      this.orbit.update();
    }
    this.requestRender();
  }

  /** Pose the arm (the links' transforms from the FK of the measured state). */
  setPoses(poses: Map<string, Transform>): void {
    this.arm?.update(poses);
    this.collision?.update(poses);
    this.requestRender();
  }

  /** Show the collision model's shapes and environment (highlighted bodies show regardless). */
  showCollision(shown: boolean): void {
    this.collisionShown = shown;
    this.collision?.setShown(shown);
    this.requestRender();
  }

  /** Draw these bodies (links, environment objects) highlighted: a colliding pair. */
  highlight(names: readonly string[]): void {
    this.highlighted = names;
    this.collision?.setHighlighted(names);
    this.requestRender();
  }

  showTarget(visible: boolean, mode: "translate" | "rotate" = "translate"): void {
    this.target.visible = visible;
    if (visible) this.gizmo.attach(this.target);
    else this.gizmo.detach();
    this.gizmo.setMode(mode);
    this.requestRender();
  }

  setTarget(pose: TargetPose): void {
    this.target.position.copy(toVector(pose.position));
    this.target.quaternion.copy(toQuaternion(pose.orientation));
    this.requestRender();
  }

  targetPose(): TargetPose {
    const p = this.target.position;
    const q = this.target.quaternion;
    return { position: [p.x, p.y, p.z], orientation: [q.w, q.x, q.y, q.z] };
  }

  private reach(model: KinematicModel): number {
    let reach = 0;
    for (const pose of model.fkAll({}).values()) reach = Math.max(reach, Math.hypot(...pose.t));
    return reach > 0.05 ? reach : 1;
  }

  private resize(container: HTMLElement): void {
    const width = Math.max(1, container.clientWidth);
    const height = Math.max(1, container.clientHeight);
    this.renderer.setSize(width, height, false);
    this.camera.aspect = width / height;
    this.camera.updateProjectionMatrix();
    this.requestRender();
  }

  private requestRender(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.renderer.render(this.scene, this.camera);
      this.onCollisionDrawn(this.collision?.drawn() ?? null);
      if (this.arm && !this.armDrawn) {
        this.armDrawn = true;
        this.onArmDrawn();
      }
    });
  }
}
