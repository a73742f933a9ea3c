// The collision model drawn in three.js: each link's capsules, spheres and boxes, translucent, on
// the link's pose from the forward kinematics the arm is drawn with; the environment in the root
// frame: a plane as a finite translucent square around the base, keep-out boxes translucent, the
// keep-in box as a wireframe. Shown on request; a highlighted body (a colliding pair) is drawn in
// red whether shown or not. Where each shape goes is collision.ts's (shapeFrame, planeSquare).
import * as THREE from "three";
import {
  type CollisionModel,
  type EnvironmentObject,
  type Shape,
  capsuleLength,
  objectFrame,
  planeSquare,
  shapeFrame,
} from "./collision";
import type { Transform } from "./kinematics";

const LINK_COLOUR = 0x3fc8c8;
const OBSTACLE_COLOUR = 0xd07a30;
const PLANE_COLOUR = 0x8c7d62;
const KEEP_IN_COLOUR = 0x6fd88a;
const HIGHLIGHT_COLOUR = 0xff2a2a;

/** What the last frame drew, for the curious and the browser test (window.armdDashboard). */
export interface CollisionDrawn {
  /** The geometry is shown (the toggle), besides any highlighted body. */
  shown: boolean;
  /** Link → its number of shapes; environment object → its type. */
  links: Record<string, number>;
  environment: Record<string, string>;
  /** Bodies (links, objects) with a visible mesh in the frame, and those drawn highlighted. */
  visible: string[];
  highlighted: string[];
}

function translucent(colour: number, opacity: number, behind = false): THREE.MeshStandardMaterial {
  // depthWrite off: translucent shapes never hide one another or the arm behind them. `behind`:
  // a hair further than it is, for a plane's square on the floor grid it usually coincides with.
  return new THREE.MeshStandardMaterial({
    color: colour,
    transparent: true,
    opacity,
    depthWrite: false,
    side: THREE.DoubleSide,
    roughness: 0.7,
    ...(behind ? { polygonOffset: true, polygonOffsetFactor: 1, polygonOffsetUnits: 1 } : {}),
  });
}

function place(object: THREE.Object3D, frame: Transform): void {
  object.position.set(frame.t[0], frame.t[1], frame.t[2]);
  object.quaternion.set(frame.q[1], frame.q[2], frame.q[3], frame.q[0]); // three.js: (x, y, z, w)
}

interface Body {
  readonly group: THREE.Group;
  readonly meshes: (THREE.Mesh | THREE.LineSegments)[];
  highlighted: boolean;
}

export class CollisionMeshes {
  readonly root = new THREE.Group();
  private readonly bodies = new Map<string, Body>();
  private readonly links: Record<string, number> = {};
  private readonly environment: Record<string, string> = {};
  private readonly materials = {
    link: translucent(LINK_COLOUR, 0.28),
    obstacle: translucent(OBSTACLE_COLOUR, 0.35),
    plane: translucent(PLANE_COLOUR, 0.25, true),
    keepIn: new THREE.LineBasicMaterial({ color: KEEP_IN_COLOUR }),
    highlight: translucent(HIGHLIGHT_COLOUR, 0.75),
    highlightPlane: translucent(HIGHLIGHT_COLOUR, 0.35, true),
    highlightLine: new THREE.LineBasicMaterial({ color: HIGHLIGHT_COLOUR }),
  };
  private shown = false;

  /** `reach`: the arm's reach (m), which sizes a plane's square. */
  constructor(collision: CollisionModel, reach: number) {
    for (const [link, shapes] of collision.links) {
      const body = this.body(link);
      for (const shape of shapes) this.add(body, this.shapeMesh(shape), shapeFrame(shape));
      this.links[link] = shapes.length;
    }
    for (const object of collision.environment) {
      const body = this.body(object.name);
      this.add(body, ...this.objectMesh(object, reach));
      this.environment[object.name] = object.type;
    }
    this.refresh();
  }

  /** Pose the links' shapes: root_from_link of every link, from the arm's forward kinematics. */
  update(poses: ReadonlyMap<string, Transform>): void {
    for (const link of Object.keys(this.links)) {
      const pose = poses.get(link);
      const group = this.bodies.get(link)?.group;
      if (pose && group) place(group, pose);
    }
  }

  setShown(shown: boolean): void {
    this.shown = shown;
    this.refresh();
  }

  /** Highlight these bodies (links or environment objects; other names are ignored). */
  setHighlighted(names: readonly string[]): void {
    for (const [name, body] of this.bodies) body.highlighted = names.includes(name);
    this.refresh();
  }

  drawn(): CollisionDrawn {
    const visible = [...this.bodies].filter(([, body]) => body.group.visible).map(([name]) => name);
    const highlighted = [...this.bodies].filter(([, body]) => body.highlighted).map(([name]) => name);
    return { shown: this.shown, links: this.links, environment: this.environment, visible, highlighted };
  }

  dispose(): void {
    for (const body of this.bodies.values()) for (const mesh of body.meshes) mesh.geometry.dispose();
    for (const material of Object.values(this.materials)) material.dispose();
  }

  private body(name: string): Body {
    const body = { group: new THREE.Group(), meshes: [], highlighted: false };
    body.group.name = `collision:${name}`;
    this.bodies.set(name, body);
    this.root.add(body.group);
    return body;
  }

  private add(body: Body, mesh: THREE.Mesh | THREE.LineSegments, frame: Transform): void {
    place(mesh, frame);
    mesh.userData.material = mesh.material;
    body.meshes.push(mesh);
    body.group.add(mesh);
  }

  private shapeMesh(shape: Shape): THREE.Mesh {
    const material = this.materials.link;
    if (shape.type === "capsule") {
      return new THREE.Mesh(new THREE.CapsuleGeometry(shape.radius, capsuleLength(shape), 6, 16), material);
    }
    if (shape.type === "sphere") return new THREE.Mesh(new THREE.SphereGeometry(shape.radius, 16, 12), material);
    return new THREE.Mesh(new THREE.BoxGeometry(...shape.size), material);
  }

  private objectMesh(object: EnvironmentObject, reach: number): [THREE.Mesh | THREE.LineSegments, Transform] {
    if (object.type === "plane") {
      const side = 2.5 * Math.max(0.4, reach);
      return [new THREE.Mesh(new THREE.PlaneGeometry(side, side), this.materials.plane), planeSquare(object)];
    }
    if (object.type === "box") {
      return [new THREE.Mesh(new THREE.BoxGeometry(...object.size), this.materials.obstacle), objectFrame(object)];
    }
    const box = new THREE.BoxGeometry(...object.size);
    const edges = new THREE.EdgesGeometry(box);
    box.dispose();
    return [new THREE.LineSegments(edges, this.materials.keepIn), objectFrame(object)];
  }

  private highlight(mesh: THREE.Mesh | THREE.LineSegments): THREE.Material {
    if (mesh instanceof THREE.LineSegments) return this.materials.highlightLine;
    return mesh.userData.material === this.materials.plane ? this.materials.highlightPlane : this.materials.highlight;
  }

  private refresh(): void {
    for (const body of this.bodies.values()) {
      body.group.visible = this.shown || body.highlighted;
      for (const mesh of body.meshes) {
        mesh.material = body.highlighted ? this.highlight(mesh) : (mesh.userData.material as THREE.Material);
      }
    }
  }
}
